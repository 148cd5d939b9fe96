// DP optimizers: DP-SGD (NoisySGD), DP-Adam (NoisyAdam) and DP-AdaGrad as wrappers around
// torch::optim optimizers (Abadi et al. 2016, Alg. 1; Bu et al. 2020, Algs. 1-2).
//
// One logical step over a Poisson batch of expected size B = q n:
//   for each physical batch (a slice of the logical batch that fits in memory):
//     forward, backward of the SUM of per-example losses, then AccumulatePhysicalBatch():
//     per-example norms from the layers' captures, clip factors per clipping group,
//     and the clipped sum  sum_i min(1, C_g/||g_i,g||) g_i,g  added to an accumulator;
//   Step(): add N(0, sigma^2 S^2) to every coordinate (S = sqrt(sum_g C_g^2), noise from
//     the SECURE generator), divide by B (fixed, not the realised batch size, as the
//     Poisson accounting requires), hand the result to the wrapped optimizer as .grad and
//     step it.
// Splitting a logical batch into physical batches changes nothing in the privacy analysis:
// clipping is per example and the noise is added once per logical step.
//
// The optimizer never computes epsilon: Step() returns what happened (sampling rate, and
// per group its clip norm and noise standard deviation) for the caller to append to the
// privacy ledger, from which the accountants compute epsilon.
#ifndef DPKIT_OPTIM_TORCH_DP_OPTIMIZER_H_
#define DPKIT_OPTIM_TORCH_DP_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mechanisms/random.h"
#include "optim/clipping.h"
#include "optim/torch/per_example_layers.h"

namespace dpkit::optim {

struct DpOptimizerOptions {
  double noise_multiplier = 1.0;      // sigma >= 0 (0: clipping only, not private)
  double clip_norm = 1.0;             // C > 0 (flat and per-layer modes)
  double sampling_rate = 0.01;        // q in (0, 1], recorded for the ledger
  double expected_batch_size = 256;   // B = q n > 0, the fixed denominator
  ClippingMode clipping = ClippingMode::kFlat;
  std::vector<std::vector<int>> joint_groups;  // kJoint: layer indices per group
  std::vector<double> joint_clip_norms;        // kJoint: C_g per group
};

// What one step did, for the ledger (McMahan et al. 2018, Sec. 3).
struct DpStepRecord {
  struct Query {
    double clip_norm;     // C_g
    double noise_stddev;  // sigma * S
  };
  double sampling_rate = 0;
  std::vector<Query> queries;
  int64_t batch_examples = 0;  // realised batch size (not privacy-relevant; for logs)
};

// The torch optimizer for "sgd" | "adam" | "adagrad" with learning rate lr.
absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeTorchOptimizer(
    const std::string& name, std::vector<torch::Tensor> parameters, double learning_rate);

class DpOptimizer {
 public:
  // Validates the model (every trainable layer has a per-example rule) and options.
  static absl::StatusOr<std::unique_ptr<DpOptimizer>> Create(
      torch::nn::Module& model, std::unique_ptr<torch::optim::Optimizer> optimizer,
      const DpOptimizerOptions& options,
      std::unique_ptr<mechanisms::RandomGenerator> noise_generator);

  // After forward and backward of the summed loss of one physical batch: clips each
  // example and adds the clipped sum to the step's accumulator. Returns the number of
  // examples. A layer without capture (e.g. unused in this forward) counts as zero.
  absl::StatusOr<int64_t> AccumulatePhysicalBatch();

  // Noise, average, step; resets the accumulator. An empty logical batch (nothing
  // accumulated) is a valid step: the update is pure noise.
  absl::StatusOr<DpStepRecord> Step();

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const DpOptimizerOptions& options() const { return options_; }
  const ClippingGroups& groups() const { return groups_; }
  // Per-example unclipped total norms of the last physical batch (diagnostics).
  const std::vector<double>& last_norms() const { return last_norms_; }

 private:
  DpOptimizer() = default;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  DpOptimizerOptions options_;
  ClippingGroups groups_;
  std::unique_ptr<mechanisms::RandomGenerator> noise_;
  std::vector<NamedPerExampleLayer> layers_;
  std::vector<std::vector<torch::Tensor>> accumulators_;  // per layer, per parameter
  int64_t examples_ = 0;
  std::vector<double> last_norms_;
};

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_OPTIMIZER_H_
