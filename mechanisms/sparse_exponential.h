// The exponential mechanism, top-k, on a SPARSE score vector: a table of num_rows
// candidates (rows) where the caller lists the rows with a non-zero score and every other
// row scores 0. Zero-score rows are still candidates (dropping them would reveal which
// rows the data touched), but they are sampled implicitly, so one selection costs
// O(listed rows + k) random draws and O(listed rows + k) memory, independent of num_rows
// (when the table is small, 2 (listed + k) > num_rows, it enumerates the zero rows).
//
// Sampler: the one-shot Gumbel top-k of Durfee & Rogers 2019 ("Practical differentially
// private top-k selection with pay-what-you-get composition", Lemma 4.2 / Thm. 1), whose
// ordered output is distributed exactly as k rounds of the exponential mechanism
// (McSherry & Talwar 2007) without replacement ("peeling"), each round choosing row r with
// P(r) ∝ exp(epsilon_per_pick * score_r / (2 sensitivity)), epsilon_per_pick = epsilon / k.
// Each listed row gets score + (2 sensitivity / epsilon_per_pick) Gumbel. The k largest of
// the n0 i.i.d. Gumbels of the zero-score rows are drawn directly from their order
// statistics: Gumbel = -log Exp(1), and the j-th smallest of n0 Exp(1) variables is
// sum_{i<=j} X_i / (n0 - i + 1), X_i ~ Exp(1) i.i.d. (Rényi's representation; David &
// Nagaraja, "Order Statistics", 3rd ed., Sec. 2.5); the rows carrying them are a uniform
// random subset of the zero-score rows (exchangeability).
//
// Privacy: epsilon-DP in total by basic composition of the k picks; each pick is also
// epsilon_per_pick-bounded-range (Durfee & Rogers 2019, Sec. 3), which RDP accountants
// use (accounting::Event::BoundedRange, accounting/rdp.h RdpBoundedRange). Neighbouring data sets
// change every score by at most `sensitivity` (L-infinity). Noise must come from a
// SecureRandomGenerator; seeded generators are for tests only.
//
// Used by optim/sparse/private_selection.h (ExponentialTopKSelector) for the row
// selection of sparse DP-SGD (Zhang, Mironov & Hejazinia 2021, Algorithm 4).
#ifndef DPKIT_MECHANISMS_SPARSE_EXPONENTIAL_H_
#define DPKIT_MECHANISMS_SPARSE_EXPONENTIAL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

// Scores of a table of num_rows rows; rows not listed score 0. Listed rows are
// distinct, in [0, num_rows), with finite scores >= 0.
struct SparseScores {
  int64_t num_rows = 0;
  std::vector<int64_t> rows;
  std::vector<double> scores;
};

// Checks the invariants of SparseScores (one-line InvalidArgument error otherwise).
absl::Status ValidateSparseScores(const SparseScores& scores);

// epsilon-DP exponential-mechanism top-k over sparse scores (see above).
class SparseExponentialTopK {
 public:
  // k >= 1; epsilon (total over the k picks) and sensitivity finite and > 0.
  static absl::StatusOr<SparseExponentialTopK> Create(int64_t k, double epsilon,
                                                      double sensitivity);
  // min(k, num_rows) distinct rows, in selection order. InvalidArgument for scores that
  // fail ValidateSparseScores.
  absl::StatusOr<std::vector<int64_t>> Select(const SparseScores& scores,
                                              RandomGenerator& rng) const;
  // SelfComposed(BoundedRange(epsilon / k), k).
  accounting::Event event() const;
  int64_t k() const { return k_; }
  double epsilon() const { return epsilon_; }
  double epsilon_per_pick() const { return epsilon_ / static_cast<double>(k_); }
  double sensitivity() const { return sensitivity_; }

 private:
  SparseExponentialTopK(int64_t k, double epsilon, double sensitivity)
      : k_(k), epsilon_(epsilon), sensitivity_(sensitivity) {}
  int64_t k_;
  double epsilon_;
  double sensitivity_;
};

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_SPARSE_EXPONENTIAL_H_
