// Private selection of embedding rows (or coordinates) for sparse DP-SGD.
//
// "Wide Network Learning with Differential Privacy" (Zhang, Mironov, Hejazinia 2021)
// selects, at every step, the rows of the gradient to update with a DP selection
// mechanism: the exponential mechanism (their Algorithm 4) or the sparse vector
// technique (their Algorithm 1). This header provides both as RowSelectors that run on
// SPARSE score vectors: a table has num_rows rows, the caller lists the rows with a
// non-zero score, and every other row has score 0. Rows with score 0 are still
// candidates (otherwise the selection would reveal which rows the batch touched), but
// the selectors sample them implicitly, so one selection costs
// O(listed rows + selected rows) random draws, independent of num_rows:
//
//  * ExponentialTopKSelector: k rounds of the exponential mechanism (McSherry & Talwar
//    2007) without replacement, each with P(row) ∝ exp(epsilon_per_pick * score /
//    (2 * sensitivity)), sampled by mechanisms/sparse_exponential.h (the one-shot Gumbel
//    top-k of Durfee & Rogers 2019, with the zero-score rows' Gumbels drawn from their
//    order statistics).
//  * SparseVectorSelector: AboveThreshold with c positive answers, Lyu, Su & Li 2017
//    ("Understanding the Sparse Vector Technique for Differential Privacy"),
//    Algorithm 1 (the variant proven epsilon-DP; the threshold noise is drawn once per
//    selection, query noise is Lap(2 c Δ / epsilon_2)), scanning rows in index order.
//    A run of zero-score rows all pass with the same probability p given the noisy
//    threshold, so the number skipped before the next pass is Geometric(p) and is
//    drawn in one step.
// The "sparse" samplers are exact reformulations of the dense mechanisms (verified
// against the dense probabilities in private_selection_test.cc).
//
// Neighbouring data sets differ by adding or removing one example; a selector's
// `sensitivity` bounds |score_r(D) - score_r(D')| for every row r (L-infinity).
#ifndef DPKIT_OPTIM_SPARSE_PRIVATE_SELECTION_H_
#define DPKIT_OPTIM_SPARSE_PRIVATE_SELECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/sparse_exponential.h"

namespace dpkit::optim::sparse {

// Scores of a table of num_rows rows; rows not listed score 0 (listed rows distinct, in
// [0, num_rows), finite scores >= 0), and the check of those invariants.
using mechanisms::SparseScores;
using mechanisms::ValidateSparseScores;

// A DP selection mechanism over the rows of a table.
class RowSelector {
 public:
  virtual ~RowSelector() = default;
  // The selected rows (distinct, in selection order). Privacy noise must come from a
  // SecureRandomGenerator; seeded generators are for tests only.
  virtual absl::StatusOr<std::vector<int64_t>> Select(const SparseScores& scores,
                                                      mechanisms::RandomGenerator& rng) const = 0;
  // The accounting event of one Select call on sensitivity-`sensitivity` scores.
  virtual accounting::Event PrivacyEvent() const = 0;
  // The maximal number of rows one call returns.
  virtual int64_t max_selected() const = 0;
  // The L-infinity score sensitivity the selector was calibrated for.
  virtual double sensitivity() const = 0;
  // A short name for reports ("exponential_top_k", "sparse_vector").
  virtual std::string name() const = 0;
};

// Exponential-mechanism top-k (their Algorithm 4, run k times without replacement):
// epsilon in total per selection, epsilon / k per pick; PrivacyEvent() is
// SelfComposed(BoundedRange(epsilon / k), k): each pick is epsilon/k-bounded-range
// (hence epsilon/k-DP), which the RDP accountant turns into a tighter bound.
class ExponentialTopKSelector final : public RowSelector {
 public:
  // num_selected >= 1; epsilon finite > 0; sensitivity finite > 0.
  static absl::StatusOr<std::unique_ptr<ExponentialTopKSelector>> Create(int64_t num_selected,
                                                                         double epsilon,
                                                                         double sensitivity);
  absl::StatusOr<std::vector<int64_t>> Select(const SparseScores& scores,
                                              mechanisms::RandomGenerator& rng) const override;
  accounting::Event PrivacyEvent() const override;
  int64_t max_selected() const override { return num_selected_; }
  std::string name() const override { return "exponential_top_k"; }
  double sensitivity() const override { return sensitivity_; }
  double epsilon_per_pick() const { return epsilon_ / static_cast<double>(num_selected_); }

 private:
  ExponentialTopKSelector(int64_t k, double epsilon, double sensitivity)
      : num_selected_(k), epsilon_(epsilon), sensitivity_(sensitivity) {}
  int64_t num_selected_;
  double epsilon_;
  double sensitivity_;
};

// Sparse vector technique (Lyu, Su & Li 2017, Alg. 1): rows in index order, a row is
// selected when score + Lap(2 c Δ / eps2) >= threshold + Lap(Δ / eps1); stops after
// c = max_selected rows. epsilon = eps1 + eps2 with eps1 : eps2 = 1 : (2c)^(2/3), the
// ratio Lyu et al. (Sec. 4.2) show minimises the error. PrivacyEvent() is PureDp(epsilon).
class SparseVectorSelector final : public RowSelector {
 public:
  // max_selected >= 1; epsilon, sensitivity finite > 0; threshold finite.
  static absl::StatusOr<std::unique_ptr<SparseVectorSelector>> Create(int64_t max_selected,
                                                                      double epsilon,
                                                                      double threshold,
                                                                      double sensitivity);
  absl::StatusOr<std::vector<int64_t>> Select(const SparseScores& scores,
                                              mechanisms::RandomGenerator& rng) const override;
  accounting::Event PrivacyEvent() const override;
  int64_t max_selected() const override { return max_selected_; }
  std::string name() const override { return "sparse_vector"; }
  double sensitivity() const override { return sensitivity_; }
  double threshold_epsilon() const { return threshold_epsilon_; }
  double query_epsilon() const { return query_epsilon_; }

 private:
  SparseVectorSelector(int64_t c, double epsilon, double threshold, double sensitivity);
  int64_t max_selected_;
  double epsilon_;
  double threshold_;
  double sensitivity_;
  double threshold_epsilon_;  // eps1
  double query_epsilon_;      // eps2
};

}  // namespace dpkit::optim::sparse

#endif  // DPKIT_OPTIM_SPARSE_PRIVATE_SELECTION_H_
