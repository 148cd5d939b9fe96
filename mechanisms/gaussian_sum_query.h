// Gaussian sum and average queries (McMahan, Andrew, Erlingsson, et al. 2018,
// "A General Approach to Adding Differential Privacy to Iterative Training
// Procedures", §2-3), framework-free on spans and Eigen vectors.
//
// A record (one example's gradient) is a list of parameter groups (layers). A query
// clips each record, sums the clipped records, adds Gaussian noise from the given
// generator, and an average query divides by a FIXED expected denominator (q N for
// Poisson sampling), never the realised batch size, which would leak it.
// Clipping modes (McMahan et al. 2018, §3):
//   flat      the whole record (all groups) is clipped to C; noise N(0, (zC)^2)
//             on every coordinate; one SumQueryRecord {C, zC}.
//   per-group group j is clipped to C_j on its own and gets N(0, (z_j C_j)^2); one
//             SumQueryRecord per group.
//   joint     with scale parameters s_j: the record is clipped so that
//             sqrt(sum_j ||v_j||^2 / s_j^2) <= C, and group j gets N(0, (z C s_j)^2):
//             a Gaussian sum query with clip C and noise zC on the rescaled vector
//             (v_j / s_j), followed by the fixed rescaling (post-processing); one
//             SumQueryRecord {C, zC}.
// The sum queries of one sample collapse to one Gaussian with noise multiplier
// z = (sum_i (C_i / s_i)^2)^(-1/2) (McMahan et al. 2018, eq. 1; computed by
// //accounting:ledger's CollapsedNoiseMultiplier).
//
// The framework-free core (clip factors of one record, and the noise plan: per-group noise
// standard deviations together with the ledger's SumQueryRecords) is exposed as free
// functions: GaussianSumQuery uses them on Eigen vectors, and optim/clipping.h uses the same
// functions for the LibTorch DP optimizers, so what is drawn and what is recorded come from
// one computation everywhere.
#ifndef DPKIT_MECHANISMS_GAUSSIAN_SUM_QUERY_H_
#define DPKIT_MECHANISMS_GAUSSIAN_SUM_QUERY_H_

#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

// One record's parameter groups, as read-only spans (no copies).
using RecordGroups = std::vector<absl::Span<const double>>;

// The noise of one Gaussian sum query over parameter groups: the standard deviation of
// every coordinate of each group, and the records the privacy ledger receives for it.
struct SumQueryNoise {
  std::vector<double> group_noise_stddevs;          // one per group, in the group's units
  std::vector<accounting::SumQueryRecord> records;  // the ledger's sum queries
};

// Independently clipped groups (McMahan et al. 2018, Sec. 3, per-layer clipping): group j
// has L2 sensitivity clip_norms[j] and noise N(0, noise_stddevs[j]^2); one record
// {clip_norms[j], noise_stddevs[j]} per group. The vectors have equal length.
SumQueryNoise IndependentGroupsNoise(const std::vector<double>& clip_norms,
                                     const std::vector<double>& noise_stddevs);

// Jointly clipped groups with scale parameters s_j (McMahan et al. 2018, Sec. 3): the
// rescaled record (v_j / s_j) has sensitivity clip_norm and gets noise noise_stddev, i.e.
// group j gets N(0, (noise_stddev s_j)^2) after the fixed rescaling (post-processing); one
// record {clip_norm, noise_stddev}. Flat clipping is the case s_j = 1.
SumQueryNoise JointGroupsNoise(double clip_norm, double noise_stddev,
                               const std::vector<double>& scales);

// Clip factors min(1, C / ||.||) of one record (Abadi et al. 2016, Alg. 1; McMahan et al.
// 2018, Sec. 3) from its per-group squared L2 norms:
//   independent groups: factors[j] = min(1, clip_norms[j] / ||v_j||);
//   joint (scales non-empty, one clip norm): every factor min(1, C / sqrt(sum_j ||v_j||^2 / s_j^2)).
void IndependentClipFactors(absl::Span<const double> clip_norms,
                            absl::Span<const double> group_squared_norms,
                            absl::Span<double> factors);
void JointClipFactors(double clip_norm, absl::Span<const double> scales,
                      absl::Span<const double> group_squared_norms, absl::Span<double> factors);

class GaussianSumQuery {
 public:
  // All groups clipped together to clip_norm; noise stddev noise_multiplier * clip_norm.
  static absl::StatusOr<GaussianSumQuery> Flat(std::vector<size_t> group_sizes,
                                               double clip_norm, double noise_multiplier);
  // Group j clipped to clip_norms[j], noise noise_multipliers[j] * clip_norms[j].
  static absl::StatusOr<GaussianSumQuery> PerGroup(std::vector<size_t> group_sizes,
                                                   std::vector<double> clip_norms,
                                                   std::vector<double> noise_multipliers);
  // Joint clipping with scale parameters (see the file comment).
  static absl::StatusOr<GaussianSumQuery> Joint(std::vector<size_t> group_sizes,
                                                std::vector<double> scales, double clip_norm,
                                                double noise_multiplier);

  // Fresh zero sums, one vector per group.
  std::vector<Eigen::VectorXd> ZeroSums() const;
  // Clips `record` and adds it to `sums`. InvalidArgument if the group count or a
  // group size differs from the query's, or a value is not finite.
  absl::Status Accumulate(const RecordGroups& record, std::vector<Eigen::VectorXd>* sums) const;
  // Adds the query's Gaussian noise to every coordinate of `sums`.
  void AddNoise(RandomGenerator& rng, std::vector<Eigen::VectorXd>* sums) const;
  // What one release spends, for the ledger.
  const std::vector<accounting::SumQueryRecord>& records() const { return records_; }
  size_t num_groups() const { return group_sizes_.size(); }

 private:
  enum class Mode { kFlat, kPerGroup, kJoint };
  GaussianSumQuery(Mode mode, std::vector<size_t> group_sizes, std::vector<double> clip_norms,
                   std::vector<double> noise_stddevs, std::vector<double> scales,
                   std::vector<accounting::SumQueryRecord> records)
      : mode_(mode), group_sizes_(std::move(group_sizes)), clip_norms_(std::move(clip_norms)),
        noise_stddevs_(std::move(noise_stddevs)), scales_(std::move(scales)),
        records_(std::move(records)) {}
  Mode mode_;
  std::vector<size_t> group_sizes_;
  std::vector<double> clip_norms_;     // flat/joint: one entry; per-group: one per group
  std::vector<double> noise_stddevs_;  // per group, in the group's own units
  std::vector<double> scales_;         // joint: s_j; otherwise all 1
  std::vector<accounting::SumQueryRecord> records_;
};

// Several named sum queries run on the same Poisson sample, averaged with the fixed
// expected batch size. One Release() is one sampling event for the ledger.
class NestedGaussianAverageQuery {
 public:
  struct Release {
    // Per sub-query (in the order given), per group: the noisy average.
    std::vector<std::pair<std::string, std::vector<Eigen::VectorXd>>> averages;
    accounting::SamplingRecord sampling_record;  // q and every SumQueryRecord
    double collapsed_noise_multiplier = 0;       // McMahan et al. 2018, eq. 1
  };

  // sampling_rate in (0, 1]; expected_batch_size finite > 0 (q N); at least one query.
  static absl::StatusOr<NestedGaussianAverageQuery> Create(
      std::vector<std::pair<std::string, GaussianSumQuery>> queries, double sampling_rate,
      double expected_batch_size);

  // records[r][k] is record r's groups for sub-query k. Clips, sums, adds noise,
  // divides by the expected batch size. An empty sample is allowed (pure noise).
  absl::StatusOr<Release> Run(const std::vector<std::vector<RecordGroups>>& records,
                              int64_t step, RandomGenerator& rng) const;

  // Run() and append its SamplingRecord to `ledger` BEFORE returning the averages
  // (so a crash can only lose the entry of an unreleased step).
  absl::StatusOr<Release> RunAndRecord(const std::vector<std::vector<RecordGroups>>& records,
                                       int64_t step, RandomGenerator& rng,
                                       accounting::LedgerWriter& ledger) const;

  double collapsed_noise_multiplier() const { return collapsed_noise_multiplier_; }

 private:
  NestedGaussianAverageQuery(std::vector<std::pair<std::string, GaussianSumQuery>> queries,
                             double sampling_rate, double expected_batch_size, double z)
      : queries_(std::move(queries)), sampling_rate_(sampling_rate),
        expected_batch_size_(expected_batch_size), collapsed_noise_multiplier_(z) {}
  std::vector<std::pair<std::string, GaussianSumQuery>> queries_;
  double sampling_rate_;
  double expected_batch_size_;
  double collapsed_noise_multiplier_;
};

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_GAUSSIAN_SUM_QUERY_H_
