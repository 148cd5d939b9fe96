// Sparse DP-SGD for embedding tables: Zhang, Mironov & Hejazinia 2021, "Wide Network
// Learning with Differential Privacy", Algorithm 3 (DP sparse SGD).
//
// One step on a Poisson sample of examples, each with a sparse gradient (a few rows of
// a num_rows x row_dim table):
//  (1) clip each example's gradient to clip_norm (C1) and sum the clipped gradients;
//      the selection score of row r is min(||sum_r||_2, selection_clip_norm);
//  (2) privately select rows with a RowSelector (exponential mechanism, their Alg. 4,
//      or sparse vector technique, their Alg. 1) on these scores. Adding or removing
//      one example moves each score by at most min(C1, selection_clip_norm): that is the
//      selector's sensitivity;
//  (3) restrict each example's raw gradient to the selected rows and clip it to
//      second_clip_norm (C2);
//  (4) sum, add N(0, (noise_multiplier * C2)^2) to each coordinate of the selected rows
//      only, divide by the expected batch size;
//  (5) table[r] -= learning_rate * noisy_average[r] for the selected rows.
// Rows that are not selected are not read or written by steps (3)–(5), and no buffer
// is proportional to num_rows: the cost of a step is O((touched rows + selected rows)
// x row_dim), plus the selector's O(touched + selected) draws (private_selection.h).
//
// Privacy of one step (add/remove neighbours): the selection event and Gaussian(z)
// composed, on a Poisson sample of rate q: StepEvent() =
// PoissonSampled(q, Composed{selector.PrivacyEvent(), Gaussian(noise_multiplier)}).
// sparse_privacy.h turns `steps` such events into (epsilon, delta).
#ifndef DPKIT_OPTIM_SPARSE_SPARSE_DP_SGD_H_
#define DPKIT_OPTIM_SPARSE_SPARSE_DP_SGD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/optim/sparse/private_selection.h"

namespace dpkit::optim::sparse {

// One example's gradient with respect to a num_rows x row_dim table: the listed rows
// (distinct) and their gradient rows, row-major (values.size() == rows.size() * row_dim).
struct SparseRowGradient {
  std::vector<int64_t> rows;
  std::vector<float> values;
};

// The hyperparameters of their Table 1 plus the sampling setup.
struct SparseDpSgdOptions {
  double learning_rate = 0.1;        // eta, finite > 0
  double clip_norm = 1.0;            // C1, finite > 0
  double selection_clip_norm = 1.0;  // cap of each row score ("DP-selection clip norm"), > 0
  double second_clip_norm = 1.0;     // C2, finite > 0
  double noise_multiplier = 1.0;     // z: noise std = z * C2, finite > 0
  double sampling_rate = 0.01;       // q of the Poisson sample, in (0, 1]
  double expected_batch_size = 1;    // q * dataset size, finite > 0
};

// What one step did.
struct SparseStepStats {
  std::vector<int64_t> selected_rows;  // in selection order
  int64_t touched_rows = 0;            // rows with a non-zero score
};

// min(1, clip_norm / norm): the factor that clips a vector of L2 norm `norm`.
double ClipFactor(double norm, double clip_norm);

// Step (1): scores of the rows touched by `batch` (rows listed in first-touch order).
absl::StatusOr<SparseScores> RowSelectionScores(absl::Span<const SparseRowGradient> batch,
                                                int64_t num_rows, int64_t row_dim,
                                                double clip_norm, double selection_clip_norm);

// Step (3) without noise: sum over examples of (gradient restricted to
// `selected_rows`, clipped to second_clip_norm), as selected_rows.size() x row_dim,
// row-major, in the order of selected_rows.
std::vector<double> ClippedSelectedSum(absl::Span<const SparseRowGradient> batch,
                                       absl::Span<const int64_t> selected_rows, int64_t row_dim,
                                       double second_clip_norm);

class SparseDpSgd {
 public:
  // The selector's sensitivity must be >= min(clip_norm, selection_clip_norm).
  static absl::StatusOr<SparseDpSgd> Create(const SparseDpSgdOptions& options, int64_t num_rows,
                                            int64_t row_dim,
                                            std::shared_ptr<const RowSelector> selector);

  // One step on a Poisson sample (may be empty). `table` is num_rows x row_dim,
  // row-major. Noise comes from `rng`: a SecureRandomGenerator outside tests.
  absl::StatusOr<SparseStepStats> Step(absl::Span<const SparseRowGradient> batch,
                                       absl::Span<float> table,
                                       mechanisms::RandomGenerator& rng) const;

  // The accounting event of one step.
  accounting::Event StepEvent() const;

  const SparseDpSgdOptions& options() const { return options_; }
  const RowSelector& selector() const { return *selector_; }
  int64_t num_rows() const { return num_rows_; }
  int64_t row_dim() const { return row_dim_; }

 private:
  SparseDpSgd(const SparseDpSgdOptions& options, int64_t num_rows, int64_t row_dim,
              std::shared_ptr<const RowSelector> selector)
      : options_(options), num_rows_(num_rows), row_dim_(row_dim), selector_(std::move(selector)) {}
  SparseDpSgdOptions options_;
  int64_t num_rows_;
  int64_t row_dim_;
  std::shared_ptr<const RowSelector> selector_;
};

}  // namespace dpkit::optim::sparse

#endif  // DPKIT_OPTIM_SPARSE_SPARSE_DP_SGD_H_
