// The DP training loop shared by the LibTorch trainers of `dpkit train` whose model is
// built from per-example layers (optim/torch/per_example_layers.h) and whose records are
// single examples: IMDb and MovieLens (models/wide/), and any new model of that shape.
//
// One logical step (Abadi et al. 2016, Alg. 1; Bu et al. 2020, Algs. 1-2): a Poisson batch
// of rate q = B / n from the SECURE generator, forward + backward of the summed per-example
// losses in physical slices, per-record clipping and secure Gaussian noise by
// optim::DpOptimizer (DP-SGD / DP-Adam / DP-AdaGrad), then the step is appended to
// output_dir/ledger.jsonl (models/training_ledger.h) before anything is reported. At each
// epoch end the model's test metrics and the epsilon computed FROM THE LEDGER FILE are
// printed (one JSON line with --format=json, a text line otherwise) and appended to
// metrics.jsonl, and a checkpoint (model.pt, optimizer.pt, checkpoint.json with the next
// step) is written atomically; --resume continues from it, appending to the same ledger,
// with the checkpoint's noise multiplier unless --noise_multiplier is given (--resume with
// --target_epsilon is rejected: the calibration covered the run's steps from its start).
// --seed sets only the model's initialisation (torch::manual_seed).
//
// The privacy-step flags of models/dp_step_options.h apply as in `dpkit train mnist`
// (a trainer lists DpStepFlagNames() among its flags): --clipping=flat|per_layer|joint
// (with --clipping_groups / --clipping_scales over the model's per-example layer names),
// --microbatch_size (records are microbatch averages, keyed by the secure generator;
// sensitivity 2C), --physical_batch_size (memory only; default
// DpTrainingDefaults::physical_batch_size) and --sampler=shuffled (fixed-size shuffled
// batches: no ledger, epsilon null with a note saying why, --target_epsilon refused).
//
// With noise_multiplier 0 the run is not private: no ledger is written and epsilon is
// reported as null with a note.
#ifndef DPKIT_MODELS_DP_TRAINING_LOOP_H_
#define DPKIT_MODELS_DP_TRAINING_LOOP_H_

#include <cstdint>
#include <functional>
#include <string>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/trainer_registry.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {

// The paper's settings of one model; every field is overridden by its common flag.
struct DpTrainingDefaults {
  double learning_rate = 0.01;
  double clip_norm = 1.0;
  double noise_multiplier = 1.0;
  int64_t batch_size = 256;  // expected (Poisson) batch size B; q = B / n
  double epochs = 1;
  std::string optimizer = "adam";
  double delta = 1e-5;  // used when --delta is not given
  // Largest forward/backward slice of a logical batch unless --physical_batch_size is
  // given. Memory only: clipping is per record and the noise is added once per step.
  int64_t physical_batch_size = 2048;
};

// A model and its data, seen through three callbacks.
struct DpTrainingTask {
  torch::nn::Module* model = nullptr;  // built from per-example layers
  int64_t train_size = 0;              // n
  // Per-example training losses, shape (B), of the training examples `indices` (int64,
  // CPU), computed with autograd on `device`.
  std::function<torch::Tensor(const torch::Tensor& indices, const torch::Device& device)>
      losses;
  // Test metrics as a JSON object (e.g. {"test_accuracy": 0.84}); called in eval mode
  // under torch::NoGradGuard.
  std::function<nlohmann::json(const torch::Device& device)> evaluate;
  // One short text for those metrics ("test accuracy 84.0%").
  std::function<std::string(const nlohmann::json& metrics)> describe;
};

// The device of --device (cpu, or cuda when this LibTorch build sees one).
absl::StatusOr<torch::Device> TrainingDevice(const TrainOptions& options);

// Runs the loop above. Errors: InvalidArgument for bad options (one line), NotFound for
// a missing checkpoint, Internal for I/O failures.
absl::Status RunDpTraining(const TrainOptions& options, const DpTrainingDefaults& defaults,
                           DpTrainingTask& task);

// Shared file helpers of the trainers.
// Creates `dir` and its parents.
absl::Status MakeDirs(const std::string& dir);
// Writes `text` to path.tmp and renames it over `path`.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text);
// "eps <= 1.2346 (PLD, delta=1e-05; RDP 1.3002)" from a LedgerEpsilon object: the headline
// rounded up (accounting::ReportToLine).
std::string EpsilonText(const nlohmann::json& epsilon, double delta);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_DP_TRAINING_LOOP_H_
