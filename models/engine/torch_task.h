// LibTorch tasks of the training engine: a model built from per-example layers
// (optim/torch/per_example_layers.h), its data seen through callbacks, and the paper's
// defaults. RunTorchTraining runs it with the one DP step every LibTorch trainer shares
// (Abadi et al. 2016, Alg. 1; Bu et al. 2020, Algs. 1-2): the records of a Poisson batch of
// rate q = B / n from the SECURE generator (or microbatches of them, or shuffled fixed-size
// batches: engine/run_plan.h), forward + backward of the summed per-example losses in
// physical slices, clipping and secure Gaussian noise by optim::DpOptimizer, whose step
// listener appends the step's sampling record to the ledger before the update is applied.
// --sampler=fixed_size draws exactly B examples per step (optim/fixed_size_sampler.h) and
// appends the step's SampledWithoutReplacement event (replace-one adjacency) instead;
// --privacy_unit=user Poisson-samples users and clips each user's mean gradient
// (engine/user_records.h), and the task's "training set" is then its N users.
// --seed sets only the model's initialisation (the trainer calls torch::manual_seed).
#ifndef DPKIT_MODELS_ENGINE_TORCH_TASK_H_
#define DPKIT_MODELS_ENGINE_TORCH_TASK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/models/engine/run_plan.h"
#include "dpkit/models/engine/training_engine.h"
#include "dpkit/models/trainer_registry.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {

// The per-example training losses of some examples, and (classifiers) how many of them
// the model classified correctly (-1: not computed).
struct TorchLosses {
  torch::Tensor losses;  // shape (B), with autograd
  int64_t correct = -1;
  // Classifiers, optional: shape (B), 1 where the example is classified correctly (the
  // per-example values of --train_metrics=private's accuracy query).
  torch::Tensor correct_mask = {};
};

// What a DP-PCA-like preparation step sees: it runs once before training; a fresh run may
// spend privacy through `ledger` (appending its event BEFORE using the result) and keep its
// result in output_dir; a resumed run reloads it.
struct TorchPrepareContext {
  bool resumed = false;
  std::string output_dir;  // may be empty
  LedgerSink* ledger = nullptr;
  mechanisms::RandomGenerator* noise = nullptr;  // the secure generator
};

struct TorchTask {
  std::string model_name;              // for messages
  torch::nn::Module* model = nullptr;  // built from per-example layers
  int64_t train_size = 0;              // n
  TaskDefaults defaults;               // the paper's settings
  // Losses of the training examples `indices` (int64, CPU) computed on `device`.
  std::function<TorchLosses(const torch::Tensor& indices, const torch::Device& device)> losses;
  // Test metrics as a JSON object (e.g. {"test_accuracy": 0.84}); called in eval mode
  // under torch::NoGradGuard.
  std::function<nlohmann::json(const torch::Device& device)> evaluate;
  // One short text for those metrics ("test accuracy 84.0%").
  std::function<std::string(const nlohmann::json& metrics)> describe;
  // Optional: see TorchPrepareContext; `prepared_files` lists what it writes.
  std::function<absl::Status(const TorchPrepareContext& context)> prepare;
  std::vector<std::string> prepared_files;
  // Optional: the learning rate of step `step` (0-based, counted over the whole run, so a
  // resumed run continues the schedule) from the planned rate and steps per epoch; set on
  // the optimizer before each update. Unset: the planned rate throughout. Post-processing
  // of the noisy gradients: privacy is unchanged.
  std::function<double(int64_t step, int64_t steps_per_epoch, double planned_rate)>
      learning_rate_at;
  std::string threads;  // ConfigureTorchThreads()'s description
  // Optional: the user id of each training example (size train_size), the privacy unit
  // of --privacy_unit=user (movielens: the rating's user). Empty: --user_ids gives them.
  std::vector<int64_t> user_of_example;
};

// Sets up LibTorch's threads, the BLAS and the allocator (optim/torch/cpu_threads.h) for
// --threads; call before the first tensor operation. Returns the description for the log.
std::string ConfigureTorchThreads(const TrainOptions& options);

// The device of --device: cpu, or cuda when this LibTorch build sees one.
absl::StatusOr<torch::Device> TrainingDevice(const std::string& device);

// The privacy-step flag names (models/dp_step_options.h) that a checkpoint stores.
std::vector<std::string> DpStepPrivacyFlagNames();

// Runs `task` through the engine (engine/training_engine.h).
absl::Status RunTorchTraining(const TrainOptions& options, TorchTask task);

// A classifier's per-example cross-entropy losses of `logits` against `labels`, with the
// correctness mask and count.
TorchLosses ClassificationLosses(const torch::Tensor& logits, const torch::Tensor& labels);

// The test metrics of a classifier: {"test_accuracy": correct / total}, and their text.
nlohmann::json TestAccuracyJson(int64_t correct, int64_t total);
std::string DescribeTestAccuracy(const nlohmann::json& metrics);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_TORCH_TASK_H_
