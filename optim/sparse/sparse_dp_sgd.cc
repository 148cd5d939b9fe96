#include "dpkit/optim/sparse/sparse_dp_sgd.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "dpkit/mechanisms/gaussian.h"

namespace dpkit::optim::sparse {
namespace {

absl::Status CheckPositive(const char* name, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be finite and > 0, got ", value));
  }
  return absl::OkStatus();
}

// Squared L2 norm of row i of an example's gradient.
double RowSquaredNorm(const SparseRowGradient& g, size_t i, int64_t row_dim) {
  const float* v = g.values.data() + i * static_cast<size_t>(row_dim);
  double sum = 0;
  for (int64_t j = 0; j < row_dim; ++j) sum += static_cast<double>(v[j]) * v[j];
  return sum;
}

absl::Status ValidateBatch(absl::Span<const SparseRowGradient> batch, int64_t num_rows,
                           int64_t row_dim) {
  absl::flat_hash_set<int64_t> rows;
  for (size_t e = 0; e < batch.size(); ++e) {
    const SparseRowGradient& g = batch[e];
    if (g.values.size() != g.rows.size() * static_cast<size_t>(row_dim)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "example ", e, ": values must hold rows.size() * row_dim = ",
          g.rows.size() * static_cast<size_t>(row_dim), " numbers, got ", g.values.size()));
    }
    rows.clear();
    for (int64_t row : g.rows) {
      if (row < 0 || row >= num_rows) {
        return absl::InvalidArgumentError(absl::StrCat("example ", e, ": row must be in [0, ",
                                                       num_rows, "), got ", row));
      }
      if (!rows.insert(row).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("example ", e, ": row ", row, " is listed twice"));
      }
    }
    for (float v : g.values) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("example ", e, ": gradient values must be finite"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

double ClipFactor(double norm, double clip_norm) {
  return norm > clip_norm ? clip_norm / norm : 1.0;
}

absl::StatusOr<SparseScores> RowSelectionScores(absl::Span<const SparseRowGradient> batch,
                                                int64_t num_rows, int64_t row_dim,
                                                double clip_norm, double selection_clip_norm) {
  if (auto s = ValidateBatch(batch, num_rows, row_dim); !s.ok()) return s;
  // Row -> index into `sums` (row_dim doubles per touched row).
  absl::flat_hash_map<int64_t, size_t> index;
  std::vector<int64_t> rows;
  std::vector<double> sums;
  for (const SparseRowGradient& g : batch) {
    double squared = 0;
    for (size_t i = 0; i < g.rows.size(); ++i) squared += RowSquaredNorm(g, i, row_dim);
    const double factor = ClipFactor(std::sqrt(squared), clip_norm);
    for (size_t i = 0; i < g.rows.size(); ++i) {
      auto [it, inserted] = index.try_emplace(g.rows[i], rows.size());
      if (inserted) {
        rows.push_back(g.rows[i]);
        sums.resize(sums.size() + static_cast<size_t>(row_dim), 0.0);
      }
      double* sum = sums.data() + it->second * static_cast<size_t>(row_dim);
      const float* v = g.values.data() + i * static_cast<size_t>(row_dim);
      for (int64_t j = 0; j < row_dim; ++j) sum[j] += factor * v[j];
    }
  }
  SparseScores scores;
  scores.num_rows = num_rows;
  for (size_t r = 0; r < rows.size(); ++r) {
    const double* sum = sums.data() + r * static_cast<size_t>(row_dim);
    double squared = 0;
    for (int64_t j = 0; j < row_dim; ++j) squared += sum[j] * sum[j];
    const double score = std::min(std::sqrt(squared), selection_clip_norm);
    if (score > 0) {
      scores.rows.push_back(rows[r]);
      scores.scores.push_back(score);
    }
  }
  return scores;
}

std::vector<double> ClippedSelectedSum(absl::Span<const SparseRowGradient> batch,
                                       absl::Span<const int64_t> selected_rows, int64_t row_dim,
                                       double second_clip_norm) {
  const size_t dim = static_cast<size_t>(row_dim);
  absl::flat_hash_map<int64_t, size_t> position;
  position.reserve(selected_rows.size());
  for (size_t i = 0; i < selected_rows.size(); ++i) position.emplace(selected_rows[i], i);
  std::vector<double> sum(selected_rows.size() * dim, 0.0);
  std::vector<std::pair<size_t, size_t>> hits;  // (row within example, selected position)
  for (const SparseRowGradient& g : batch) {
    hits.clear();
    double squared = 0;
    for (size_t i = 0; i < g.rows.size(); ++i) {
      auto it = position.find(g.rows[i]);
      if (it == position.end()) continue;
      hits.emplace_back(i, it->second);
      squared += RowSquaredNorm(g, i, row_dim);
    }
    const double factor = ClipFactor(std::sqrt(squared), second_clip_norm);
    for (const auto& [i, p] : hits) {
      const float* v = g.values.data() + i * dim;
      double* out = sum.data() + p * dim;
      for (size_t j = 0; j < dim; ++j) out[j] += factor * v[j];
    }
  }
  return sum;
}

absl::StatusOr<SparseDpSgd> SparseDpSgd::Create(const SparseDpSgdOptions& options,
                                                int64_t num_rows, int64_t row_dim,
                                                std::shared_ptr<const RowSelector> selector) {
  if (auto s = CheckPositive("learning_rate", options.learning_rate); !s.ok()) return s;
  if (auto s = CheckPositive("clip_norm", options.clip_norm); !s.ok()) return s;
  if (auto s = CheckPositive("selection_clip_norm", options.selection_clip_norm); !s.ok()) {
    return s;
  }
  if (auto s = CheckPositive("second_clip_norm", options.second_clip_norm); !s.ok()) return s;
  if (auto s = CheckPositive("noise_multiplier", options.noise_multiplier); !s.ok()) return s;
  if (auto s = CheckPositive("expected_batch_size", options.expected_batch_size); !s.ok()) {
    return s;
  }
  if (!(options.sampling_rate > 0 && options.sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate must be in (0, 1], got ", options.sampling_rate));
  }
  if (num_rows < 1 || row_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_rows and row_dim must be >= 1, got ", num_rows, " and ", row_dim));
  }
  if (selector == nullptr) return absl::InvalidArgumentError("selector must not be null");
  const double needed = std::min(options.clip_norm, options.selection_clip_norm);
  if (!(selector->sensitivity() >= needed)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the selector's sensitivity must be >= min(clip_norm, selection_clip_norm) = ", needed,
        ", got ", selector->sensitivity()));
  }
  return SparseDpSgd(options, num_rows, row_dim, std::move(selector));
}

absl::StatusOr<SparseStepStats> SparseDpSgd::Step(absl::Span<const SparseRowGradient> batch,
                                                  absl::Span<float> table,
                                                  mechanisms::RandomGenerator& rng) const {
  if (table.size() != static_cast<size_t>(num_rows_) * static_cast<size_t>(row_dim_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table must hold num_rows * row_dim = ", num_rows_ * row_dim_, " numbers, got ",
        table.size()));
  }
  // (1) clip to C1, row scores capped at the selection clip norm.
  absl::StatusOr<SparseScores> scores = RowSelectionScores(
      batch, num_rows_, row_dim_, options_.clip_norm, options_.selection_clip_norm);
  if (!scores.ok()) return scores.status();
  SparseStepStats stats;
  stats.touched_rows = static_cast<int64_t>(scores->rows.size());
  // (2) private selection.
  absl::StatusOr<std::vector<int64_t>> selected = selector_->Select(*scores, rng);
  if (!selected.ok()) return selected.status();
  stats.selected_rows = *std::move(selected);
  // (3) second clipping on the selected rows, (4) noise on them only.
  std::vector<double> update =
      ClippedSelectedSum(batch, stats.selected_rows, row_dim_, options_.second_clip_norm);
  mechanisms::AddGaussian(rng, options_.noise_multiplier * options_.second_clip_norm,
                          update.data(), update.size());
  // (5) update: fixed expected denominator (McMahan et al. 2018, Sec. 3).
  const double scale = options_.learning_rate / options_.expected_batch_size;
  const size_t dim = static_cast<size_t>(row_dim_);
  for (size_t i = 0; i < stats.selected_rows.size(); ++i) {
    float* row = table.data() + static_cast<size_t>(stats.selected_rows[i]) * dim;
    const double* u = update.data() + i * dim;
    for (size_t j = 0; j < dim; ++j) row[j] = static_cast<float>(row[j] - scale * u[j]);
  }
  return stats;
}

accounting::Event SparseDpSgd::StepEvent() const {
  // Validated parameters: the factories cannot fail here.
  accounting::Event gaussian = accounting::Event::Gaussian(options_.noise_multiplier).value();
  accounting::Event step =
      accounting::Event::Composed({selector_->PrivacyEvent(), gaussian}).value();
  return accounting::Event::PoissonSampled(options_.sampling_rate, step).value();
}

}  // namespace dpkit::optim::sparse
