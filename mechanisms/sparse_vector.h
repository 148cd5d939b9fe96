// The sparse vector technique: report which of a stream of scores exceed a
// threshold, paying only for the positives.
//
// Implements Dwork & Roth 2014, Algorithm 1 (AboveThreshold, c = 1), Algorithm 2
// (Sparse: c positives, the threshold noise redrawn after EVERY positive) and
// Algorithm 3 (NumericSparse: also releases noisy values of the selected scores).
// The noise scales are derived from (epsilon, c, sensitivity) inside the class and
// cannot be set: the known broken variants (Lyu, Su, Li 2017, Sec. 3: threshold
// noise not refreshed with query noise not scaled by c, no query noise, unlimited
// positives, releasing the noisy value used in the comparison) are not expressible.
// With a monotone flag off (the default) the analysis holds for any queries of
// sensitivity Delta.
#ifndef DPKIT_MECHANISMS_SPARSE_VECTOR_H_
#define DPKIT_MECHANISMS_SPARSE_VECTOR_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

struct SparseVectorResult {
  std::vector<size_t> indices;       // the positives, in stream order (<= c of them)
  std::vector<double> noisy_values;  // NumericSparse only: one per index, fresh noise
  size_t scores_examined = 0;        // the algorithm halts after the c-th positive
};

class SparseVector {
 public:
  // epsilon-DP over the whole run; max_positives = c >= 1; threshold finite.
  // Selection (Sparse, Dwork & Roth Alg. 2) spends eps_sel = eps, or 8 eps / 9 when
  // release_values; it runs c AboveThresholds with eps_sel / c each:
  // rho ~ Lap(2 c Delta / eps_sel) (redrawn after each positive), nu_i ~
  // Lap(4 c Delta / eps_sel). Released values (NumericSparse, Dwork & Roth Alg. 3
  // with eps1 = 8 eps/9, eps2 = 2 eps/9): u_i + Lap(2 c Delta / eps2), costing
  // c Delta / (2 c Delta / eps2) = eps2 / 2 = eps / 9 by the Laplace mechanism.
  static absl::StatusOr<SparseVector> Create(double epsilon, double threshold,
                                             size_t max_positives, double sensitivity,
                                             bool release_values);
  absl::StatusOr<SparseVectorResult> Run(absl::Span<const double> scores,
                                         RandomGenerator& rng) const;
  absl::StatusOr<SparseVectorResult> Run(absl::Span<const float> scores,
                                         RandomGenerator& rng) const;
  accounting::Event event() const;  // PureDp(epsilon)

  // Noise scales (for documentation and tests).
  double threshold_noise_scale() const;  // Laplace scale of rho, redrawn per positive
  double query_noise_scale() const;      // Laplace scale of nu_i
  double value_noise_scale() const;      // Laplace scale of released values (0 if none)

 private:
  SparseVector(double epsilon, double threshold, size_t max_positives, double sensitivity,
               bool release_values)
      : epsilon_(epsilon), threshold_(threshold), max_positives_(max_positives),
        sensitivity_(sensitivity), release_values_(release_values) {}
  template <typename T>
  absl::StatusOr<SparseVectorResult> RunImpl(absl::Span<const T> scores,
                                             RandomGenerator& rng) const;
  double selection_epsilon() const;
  double epsilon_;
  double threshold_;
  size_t max_positives_;
  double sensitivity_;
  bool release_values_;
};

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_SPARSE_VECTOR_H_
