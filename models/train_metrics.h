// Training-set metrics of a DP training run, released with differential privacy by a
// nested Gaussian average query (McMahan, Andrew, Erlingsson, et al. 2018, "A General
// Approach to Adding Differential Privacy to Iterative Training Procedures", Secs. 2-3):
// the loss and the accuracy a trainer prints about its TRAINING data are computed from
// private records, so without noise they are not covered by the run's epsilon.
//
//   --train_metrics=nonprivate  (default) the epoch's mean loss / accuracy over the training
//       steps' own batches, exactly; labelled "not private" in the output: they are NOT
//       covered by the reported epsilon.
//   --train_metrics=private  at each epoch end, a fresh Poisson sample of the training set
//       with rate q_m (--train_metrics_sampling_rate; default min(1, 10 q)) is evaluated by
//       the current model; each example's loss is clipped to [0, L] (--train_metrics_loss_bound)
//       and, for classifiers, its correctness is 0 or 1. Two Gaussian sum queries, one per
//       metric, clip norms L and 1, noise standard deviations z L and z (z =
//       --train_metrics_noise), run on the same sample (a nested query) and are divided by
//       the FIXED expected sample size q_m n (never the realised one). Together they are one
//       Gaussian mechanism with noise multiplier z / sqrt(2) (McMahan et al. 2018, eq. 1),
//       recorded in the ledger as PoissonSampled(q_m, Gaussian(z / sqrt(2))) BEFORE the values
//       are printed, so the reported epsilon covers them.
//   --train_metrics=none  no training-set metrics.
// Only example-level Poisson-sampled runs release private metrics (their event shares the
// steps' add/remove adjacency); the other samplers and units are refused in one line.
#ifndef DPKIT_MODELS_TRAIN_METRICS_H_
#define DPKIT_MODELS_TRAIN_METRICS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/models/trainer_registry.h"

namespace dpkit::models {

struct TrainMetricsOptions {
  std::string mode = "nonprivate";  // nonprivate | private | none
  double sampling_rate = 0;         // q_m in (0, 1]; resolved from q when not given
  double noise_multiplier = 10;     // z
  double loss_bound = 5;            // L: each example's loss is clipped to [0, L]
  bool released_privately() const { return mode == "private"; }
  bool nonprivate() const { return mode == "nonprivate"; }
};

// The flag names (no dashes), for TrainerInfo::flags and the checkpoint's privacy flags.
std::vector<std::string> TrainMetricsFlagNames();

// Parses and range-checks the flags for a run of Poisson sampling rate `sampling_rate`.
// InvalidArgument with one line naming the flag and its allowed range.
absl::StatusOr<TrainMetricsOptions> ParseTrainMetricsOptions(const TrainOptions& options,
                                                             double sampling_rate);

// The ledger event of one private release: PoissonSampled(q_m, Gaussian(z / sqrt(2))), the
// two sum queries collapsed (McMahan et al. 2018, eq. 1). A regression task releases only
// the loss (z alone); this event, with both queries, is the larger one, and run planning
// uses it (an over-estimate is safe).
absl::StatusOr<accounting::Event> TrainMetricsEvent(const TrainMetricsOptions& options);

// The per-example values of one metrics sample, in sample order.
struct TrainMetricsSample {
  std::vector<double> losses;   // any real; NaN and +inf count as the bound
  std::vector<double> correct;  // 0 or 1 per example; empty: not a classifier
};

// One private release.
struct TrainMetricsRelease {
  double loss = 0;                  // noisy mean loss (clipped losses)
  std::optional<double> accuracy;   // noisy accuracy (classifiers)
  double expected_examples = 0;     // q_m n, the denominator
  double loss_stddev = 0;           // z L / (q_m n): the noise's standard deviation
  double accuracy_stddev = 0;       // z / (q_m n)
  accounting::Event event;          // what was appended to the ledger
};

// Runs the nested query on `sample` (drawn by the caller at options.sampling_rate from
// `population` examples with the secure generator), adds the noise from `noise`, and calls
// `record(event)` BEFORE returning the values (a failed record releases nothing).
absl::StatusOr<TrainMetricsRelease> ReleaseTrainMetrics(
    const TrainMetricsOptions& options, int64_t population, const TrainMetricsSample& sample,
    int64_t step, mechanisms::RandomGenerator& noise,
    const std::function<absl::Status(const accounting::Event&)>& record);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_TRAIN_METRICS_H_
