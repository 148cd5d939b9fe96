// The privacy-step flags shared by the LibTorch `dpkit train` trainers (mnist,
// fashion-mnist, mnist-pca, and the tasks of //models/engine:torch_task: adult, imdb,
// movielens), parsed once here so that every trainer accepts and checks them the same way:
//
//   --clipping=flat|per_layer|joint  joint: --clipping_groups (';'-separated groups of
//       ','-separated layer names, default one group per layer) and --clipping_scales
//       (one s_g > 0 per group): McMahan et al. 2018, Sec. 3 joint clipping with scales.
//   --microbatch_size=K  a record is the average gradient of a microbatch of ~K examples
//       (M = round(B/K) slots, example -> slot by a keyed hash of its index, key fresh per
//       step from the secure generator); sensitivity 2C, so the noise is 2 sigma C and the
//       ledger's queries read {2C, 2 sigma C} (optim/clipping.h): the recorded
//       Poisson-sampled Gaussian event, hence epsilon, is that of K = 1 at the same sigma.
//   --physical_batch_size  memory only: the logical batch (its microbatches never split) is
//       processed in slices; clipping, noise and the ledger are unchanged.
//   --clipping=per_layer_dim  per-layer clipping with C_j = C sqrt(d_j / D), d_j the
//       layer's parameter count (McMahan et al. 2018, Sec. 3; optim/clipping.h): total
//       sensitivity C, noise sigma C, the ledger's sigma unchanged.
//   --sampler=poisson|fixed_size|shuffled  fixed_size: each step a uniformly random subset
//       of exactly B of the n examples, drawn independently per step (sampling without
//       replacement, optim/fixed_size_sampler.h); certified under REPLACE-ONE adjacency,
//       the ledger records SampledWithoutReplacement(n, B, Gaussian(sigma / 2)) per step
//       (a replaced example moves the clipped sum by up to 2C; the noise stays sigma C)
//       and the PLD (replace-one, accounting/pld.h) and RDP (Wang, Balle, Kasiviswanathan
//       2019, Thm. 9) accountants bound it; --target_epsilon calibrates sigma by the
//       smaller bound.
//       shuffled fixed-size batches are NOT covered by the accountants: trainers write no
//       ledger and report no epsilon, only kShuffledNote.
//   --privacy_unit=example|user  user: user-level DP (McMahan et al. 2018, Alg. 1): the
//       users are Poisson sampled with rate q = B / N (B now the expected number of users
//       per step, N the number of users), each sampled user's examples give one record,
//       their mean gradient, clipped to C; noise sigma C on the sum, divided by B. The
//       ledger's rate is the user rate, so epsilon is user-level. The user of each
//       training example is the model's (movielens: the rating's user) or, for other
//       models, line i of --user_ids (one integer per training example).
//
// The flags are defined (ABSL_FLAG) in dp_step_options.cc; a trainer lists DpStepFlagNames()
// in its TrainerInfo::flags and reads them from TrainOptions::extra_flags (a name missing
// there takes its documented default, so tests need not set every flag).
#ifndef DPKIT_MODELS_DP_STEP_OPTIONS_H_
#define DPKIT_MODELS_DP_STEP_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/optim/clipping.h"
#include "dpkit/optim/torch/dp_optimizer.h"

namespace dpkit::models {

struct DpStepOptions {
  optim::ClippingMode clipping = optim::ClippingMode::kFlat;
  std::string clipping_name = "flat";
  std::string clipping_groups;  // --clipping=joint only
  std::string clipping_scales;  // --clipping=joint only
  int64_t microbatch_size = 1;
  int64_t physical_batch_size = 512;
  std::string sampler = "poisson";
  std::string privacy_unit = "example";
  std::string user_ids;  // --user_ids: file of each training example's user id
  bool shuffled() const { return sampler == "shuffled"; }
  bool fixed_size() const { return sampler == "fixed_size"; }
  bool user_level() const { return privacy_unit == "user"; }
};

// The names above and the --train_metrics flags (models/train_metrics.h; not stored in a
// checkpoint: every release is in the ledger), without dashes, for TrainerInfo::flags.
std::vector<std::string> DpStepFlagNames();

// Parses and range-checks the flags for a run of expected batch size `batch_size`.
// `default_physical_batch_size` applies unless "physical_batch_size" is in
// options.given_flags (each trainer's memory/speed trade-off). InvalidArgument with a one-line message naming the
// flag and its allowed values.
absl::StatusOr<DpStepOptions> ParseDpStepOptions(const TrainOptions& options,
                                                 int64_t batch_size,
                                                 int64_t default_physical_batch_size);

// Sets the clipping mode, microbatch size and (joint) groups and scales of `dp_options`
// for `model`, whose per-example layers (optim/torch/per_example_layers.h) are looked up by
// name for --clipping_groups. dp_options->clip_norm must be set first.
absl::Status ApplyDpStepOptions(const DpStepOptions& step, torch::nn::Module& model,
                                optim::DpOptimizerOptions* dp_options);

// The per-epoch note of a --sampler=shuffled run (its epsilon is null).
extern const char kShuffledNote[];

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_DP_STEP_OPTIONS_H_
