// DP optimizers: DP-SGD (NoisySGD), DP-Adam (NoisyAdam) and DP-AdaGrad as wrappers around
// torch::optim optimizers (Abadi et al. 2016, Alg. 1; Bu et al. 2020, Algs. 1-2).
//
// One logical step over a Poisson batch of expected size B = q n:
//   for each physical batch (a slice of the logical batch that fits in memory):
//     forward, backward of the SUM of per-example losses, then AccumulatePhysicalBatch():
//     per-record norms from the layers' captures, clip factors per clipping group
//     (optim/clipping.h: flat, per-layer, or joint with scales), and the clipped sum
//     sum_r f_r,g g_r,g added to the parameters' .grad tensors, which serve as the
//     accumulators (no second parameter-sized buffer; they are allocated at the step's first
//     physical batch and set to none after Step, like torch's zero_grad(set_to_none); do
//     not touch them between AccumulatePhysicalBatch and Step);
//   Step(): add Gaussian noise from the SECURE generator (standard deviation sigma * Delta
//     per coordinate, Delta the L2 sensitivity of the clipped sum, times s_g for joint
//     groups; drawn in small chunks), divide by the fixed expected number of records (B,
//     or M = round(B/k) with microbatches; never the realised count, as the Poisson
//     accounting requires), step the wrapped optimizer, release the .grad accumulators.
// Records: with microbatch_size k = 1 a record is one example's gradient; with k > 1 it is
// the average gradient of one microbatch's examples (the caller passes the microbatch
// sizes; the microbatch assignment must not depend on other examples, see
// optim/poisson_sampler.h's AssignMicrobatches), and Delta doubles (optim/clipping.h);
// with unit_records it is the average gradient of one privacy unit's (user's) examples,
// and Delta does not double (see DpOptimizerOptions::unit_records).
// Splitting a logical batch into physical batches changes nothing in the privacy analysis:
// clipping is per record (a microbatch is never split across physical batches) and the
// noise is added once per logical step.
//
// The optimizer never computes epsilon. The step's noise comes from the noise plan of
// optim/clipping.h (MakeNoisePlan), which also gives the step's accounting::SamplingRecord
// (sampling rate and the sum queries): Step() hands that record to the step listener
// AFTER the noise is drawn and BEFORE the wrapped optimizer applies the update (the
// training engine appends it to the privacy ledger there, durably), and returns it too.
#ifndef DPKIT_OPTIM_TORCH_DP_OPTIMIZER_H_
#define DPKIT_OPTIM_TORCH_DP_OPTIMIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/optim/clipping.h"
#include "dpkit/optim/torch/per_example_layers.h"

namespace dpkit::optim {

struct DpOptimizerOptions {
  double noise_multiplier = 1.0;      // sigma >= 0 (0: clipping only, not private)
  double clip_norm = 1.0;             // C > 0 (flat, per-layer: total; joint: joint clip norm)
  double sampling_rate = 0.01;        // q in (0, 1], recorded for the ledger
  double expected_batch_size = 256;   // B = q n > 0, the fixed denominator
  ClippingMode clipping = ClippingMode::kFlat;
  std::vector<std::vector<int>> joint_groups;  // kJoint: layer indices per group
  std::vector<double> joint_scales;            // kJoint: scale s_g > 0 per group
  int64_t microbatch_size = 1;                 // k >= 1: a record = the mean of k examples
  // Records are privacy units (user-level DP, McMahan et al. 2018, Alg. 1): the caller
  // passes the sizes of the runs of consecutive examples that form each unit (a user's
  // examples), a record is the mean gradient of one unit's examples, clipped as above.
  // Adding or removing a unit adds or removes one record, so Delta = S (no doubling, unlike
  // microbatches) and the fixed denominator is expected_batch_size, the EXPECTED number of
  // units q N. Needs microbatch_size 1.
  bool unit_records = false;
  // false: Step() adds no noise (the sampling record still carries sigma). Only for a rank
  // of a distributed step other than the one that draws the step's noise once for all
  // ranks (models/engine/distributed.h).
  bool draw_noise = true;
};

// What one step did (McMahan et al. 2018, Sec. 3).
struct DpStepResult {
  // q and the noise plan's sum queries: {Delta_g, sigma Delta} (optim/clipping.h).
  accounting::SamplingRecord sampling;
  int64_t batch_examples = 0;  // realised batch size (not privacy-relevant; for logs)
  int64_t records = 0;         // clipped records (examples, or non-empty microbatches)
};

// Called by Step() with the step's sampling record before the update is applied. An error
// aborts the step: the update is not applied and Step() returns the error.
using DpStepListener = std::function<absl::Status(const accounting::SamplingRecord&)>;

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
  // record and adds the clipped sum to the step's accumulator. Returns the number of
  // examples. A layer without capture (e.g. unused in this forward) counts as zero.
  // With microbatch_size > 1, `microbatch_sizes` gives the sizes (>= 1, summing to the
  // physical batch) of the runs of consecutive examples that form its microbatches;
  // with microbatch_size 1 it must be empty.
  absl::StatusOr<int64_t> AccumulatePhysicalBatch(
      absl::Span<const int64_t> microbatch_sizes = {});

  // Noise, average, listener, step; resets the accumulator. An empty logical batch
  // (nothing accumulated) is a valid step: the update is pure noise. `step` is the
  // record's step number (informational).
  absl::StatusOr<DpStepResult> Step(int64_t step = 0);

  // The listener of every later Step() (none by default).
  void SetStepListener(DpStepListener listener) { listener_ = std::move(listener); }

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const DpOptimizerOptions& options() const { return options_; }
  const ClippingGroups& groups() const { return groups_; }
  // Per-record unclipped total norms of the last physical batch (diagnostics; for
  // microbatches the norm of the microbatch's average gradient).
  const std::vector<double>& last_norms() const { return last_norms_; }

 private:
  DpOptimizer() = default;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  DpOptimizerOptions options_;
  ClippingGroups groups_;
  std::unique_ptr<mechanisms::RandomGenerator> noise_;
  NoisePlan noise_plan_;  // fixed by the options: computed once in Create
  DpStepListener listener_;
  std::vector<NamedPerExampleLayer> layers_;
  // Sets the .grad tensors to none and forgets the accumulators.
  void ReleaseAccumulators();
  // Allocates the .grad accumulators (zeros) if this step has none yet.
  void EnsureAccumulators();
  std::vector<std::vector<torch::Tensor>> sums_;  // per layer, per parameter: their .grad
  bool accumulators_ready_ = false;
  torch::Tensor noise_chunk_;                    // reused float32 CPU buffer for noise
  int64_t examples_ = 0, records_ = 0;
  std::vector<double> last_norms_;
};

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_OPTIMIZER_H_
