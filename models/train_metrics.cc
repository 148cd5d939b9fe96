#include "dpkit/models/train_metrics.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "dpkit/mechanisms/gaussian_sum_query.h"

ABSL_FLAG(std::string, train_metrics, "nonprivate",
          "training-set loss/accuracy in the epoch lines: nonprivate (exact over the steps' "
          "batches, NOT covered by epsilon) | private (a DP nested query on a fresh Poisson "
          "sample, recorded in the ledger: McMahan et al. 2018) | none");
ABSL_FLAG(double, train_metrics_sampling_rate, 0,
          "--train_metrics=private: Poisson rate of the metrics sample, in (0, 1] (default: 10 "
          "times the training rate, at most 1)");
ABSL_FLAG(double, train_metrics_noise, 10,
          "--train_metrics=private: noise multiplier z of each metric's sum query, in [0.1, "
          "1e6]; the two queries together are a Gaussian with noise multiplier z / sqrt(2)");
ABSL_FLAG(double, train_metrics_loss_bound, 5,
          "--train_metrics=private: each example's loss is clipped to [0, bound], bound in "
          "(0, 1e6]");

namespace dpkit::models {
namespace {

constexpr double kMinNoise = 0.1, kMaxNoise = 1e6, kMaxLossBound = 1e6;

// The flag's value as given to the run (its default when absent from `extra_flags`).
absl::StatusOr<double> NumberFlag(const TrainOptions& o, const std::string& name, double dflt,
                                  double low, double high, bool low_open,
                                  const std::string& range) {
  const auto it = o.extra_flags.find(name);
  if (it == o.extra_flags.end()) return dflt;
  double value = 0;
  const bool parsed = absl::SimpleAtod(it->second, &value) && std::isfinite(value);
  if (!parsed || (low_open ? value <= low : value < low) || value > high) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be ", range, ", got '",
                                                   it->second.substr(0, 80), "'"));
  }
  return value;
}

}  // namespace

std::vector<std::string> TrainMetricsFlagNames() {
  return {"train_metrics", "train_metrics_sampling_rate", "train_metrics_noise",
          "train_metrics_loss_bound"};
}

absl::StatusOr<TrainMetricsOptions> ParseTrainMetricsOptions(const TrainOptions& o,
                                                             double sampling_rate) {
  TrainMetricsOptions options;
  const auto mode = o.extra_flags.find("train_metrics");
  if (mode != o.extra_flags.end()) options.mode = mode->second;
  if (options.mode != "nonprivate" && options.mode != "private" && options.mode != "none") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--train_metrics must be nonprivate, private or none, got '", options.mode.substr(0, 80),
        "'"));
  }
  absl::StatusOr<double> rate = NumberFlag(o, "train_metrics_sampling_rate", 0, 0, 1,
                                           /*low_open=*/false, "in (0, 1] (0: 10 q, at most 1)");
  if (!rate.ok()) return rate.status();
  absl::StatusOr<double> noise = NumberFlag(o, "train_metrics_noise", 10, kMinNoise, kMaxNoise,
                                            /*low_open=*/false, "in [0.1, 1e6]");
  if (!noise.ok()) return noise.status();
  absl::StatusOr<double> bound = NumberFlag(o, "train_metrics_loss_bound", 5, 0, kMaxLossBound,
                                            /*low_open=*/true, "in (0, 1e6]");
  if (!bound.ok()) return bound.status();
  options.sampling_rate = *rate > 0 ? *rate : std::min(1.0, 10 * sampling_rate);
  options.noise_multiplier = *noise;
  options.loss_bound = *bound;
  return options;
}

absl::StatusOr<accounting::Event> TrainMetricsEvent(const TrainMetricsOptions& options) {
  // Two sum queries with noise z C_i on sensitivity C_i: z_collapsed = (sum_i (C_i / (z
  // C_i))^2)^{-1/2} = z / sqrt(2) (McMahan et al. 2018, eq. 1).
  auto gaussian = accounting::Event::Gaussian(options.noise_multiplier / std::sqrt(2.0));
  if (!gaussian.ok()) return absl::InvalidArgumentError(gaussian.error());
  auto sampled = accounting::Event::PoissonSampled(options.sampling_rate, *gaussian);
  if (!sampled.ok()) return absl::InvalidArgumentError(sampled.error());
  return *sampled;
}

absl::StatusOr<TrainMetricsRelease> ReleaseTrainMetrics(
    const TrainMetricsOptions& options, int64_t population, const TrainMetricsSample& sample,
    int64_t step, mechanisms::RandomGenerator& noise,
    const std::function<absl::Status(const accounting::Event&)>& record) {
  const bool classifier = !sample.correct.empty();
  if (classifier && sample.correct.size() != sample.losses.size()) {
    return absl::InternalError("train metrics: one correctness value per loss expected");
  }
  // Each record's values, clipped to the queries' bounds: a loss in [0, L] (a NaN or +inf
  // loss, e.g. of a diverged model, is bounded like any other), a correctness in [0, 1].
  const double bound = options.loss_bound;
  std::vector<double> losses(sample.losses.size()), correct(sample.correct.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    const double l = sample.losses[i];
    losses[i] = std::isnan(l) ? bound : std::clamp(l, 0.0, bound);
  }
  for (size_t i = 0; i < correct.size(); ++i) correct[i] = std::clamp(sample.correct[i], 0.0, 1.0);
  std::vector<std::pair<std::string, mechanisms::GaussianSumQuery>> queries;
  auto loss_query = mechanisms::GaussianSumQuery::Flat({1}, bound, options.noise_multiplier);
  if (!loss_query.ok()) return loss_query.status();
  queries.emplace_back("loss", *std::move(loss_query));
  if (classifier) {
    auto accuracy_query = mechanisms::GaussianSumQuery::Flat({1}, 1.0, options.noise_multiplier);
    if (!accuracy_query.ok()) return accuracy_query.status();
    queries.emplace_back("accuracy", *std::move(accuracy_query));
  }
  const double expected = options.sampling_rate * static_cast<double>(population);
  auto nested = mechanisms::NestedGaussianAverageQuery::Create(std::move(queries),
                                                               options.sampling_rate, expected);
  if (!nested.ok()) return nested.status();
  std::vector<std::vector<mechanisms::RecordGroups>> records(losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    records[i].push_back({absl::MakeConstSpan(&losses[i], 1)});
    if (classifier) records[i].push_back({absl::MakeConstSpan(&correct[i], 1)});
  }
  absl::StatusOr<mechanisms::NestedGaussianAverageQuery::Release> release =
      nested->Run(records, step, noise);
  if (!release.ok()) return release.status();
  // The ledger's entry: the nested query's sampling record as one event (its queries
  // collapsed, eq. 1), appended before anything is released.
  auto gaussian = accounting::Event::Gaussian(release->collapsed_noise_multiplier);
  if (!gaussian.ok()) return absl::InternalError(gaussian.error());
  auto event = accounting::Event::PoissonSampled(options.sampling_rate, *gaussian);
  if (!event.ok()) return absl::InternalError(event.error());
  absl::Status recorded = record(*event);
  if (!recorded.ok()) return recorded;
  TrainMetricsRelease out{0, std::nullopt, expected, options.noise_multiplier * bound / expected,
                          options.noise_multiplier / expected, *event};
  out.loss = release->averages[0].second[0](0);
  if (classifier) out.accuracy = release->averages[1].second[0](0);
  return out;
}

}  // namespace dpkit::models
