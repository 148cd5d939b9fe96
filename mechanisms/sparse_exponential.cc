#include "dpkit/mechanisms/sparse_exponential.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace dpkit::mechanisms {
namespace {

// Uniform in the open interval (0, 1): (m + 1/2) 2^-53, m uniform in [0, 2^53).
double OpenUniform(uint64_t word) {
  return (static_cast<double>(word >> 11) + 0.5) * 0x1.0p-53;
}

// Exp(1) by inversion.
double StandardExponential(RandomGenerator& rng) {
  return -std::log(OpenUniform(rng.NextUint64()));
}

absl::Status CheckPositive(const char* name, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be finite and > 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSparseScores(const SparseScores& scores) {
  if (scores.num_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_rows must be >= 1, got ", scores.num_rows));
  }
  if (scores.rows.size() != scores.scores.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows and scores must have the same length, got ", scores.rows.size(), " and ",
        scores.scores.size()));
  }
  absl::flat_hash_set<int64_t> seen;
  seen.reserve(scores.rows.size());
  for (size_t i = 0; i < scores.rows.size(); ++i) {
    const int64_t row = scores.rows[i];
    if (row < 0 || row >= scores.num_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("row must be in [0, ", scores.num_rows, "), got ", row));
    }
    if (!seen.insert(row).second) {
      return absl::InvalidArgumentError(absl::StrCat("row ", row, " is listed twice"));
    }
    if (!std::isfinite(scores.scores[i]) || scores.scores[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "score of row ", row, " must be finite and >= 0, got ", scores.scores[i]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SparseExponentialTopK> SparseExponentialTopK::Create(int64_t k, double epsilon,
                                                                    double sensitivity) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("k must be >= 1, got ", k));
  if (auto s = CheckPositive("epsilon", epsilon); !s.ok()) return s;
  if (auto s = CheckPositive("sensitivity", sensitivity); !s.ok()) return s;
  return SparseExponentialTopK(k, epsilon, sensitivity);
}

accounting::Event SparseExponentialTopK::event() const {
  // Validated parameters: the factories cannot fail here. Each pick is an exponential
  // mechanism with epsilon/k, hence (epsilon/k)-bounded-range (Durfee & Rogers 2019), which
  // implies (epsilon/k)-DP and has a tighter RDP (accounting/rdp.h, RdpBoundedRange).
  return accounting::Event::SelfComposed(*accounting::Event::BoundedRange(epsilon_per_pick()), k_)
      .value();
}

absl::StatusOr<std::vector<int64_t>> SparseExponentialTopK::Select(const SparseScores& scores,
                                                                   RandomGenerator& rng) const {
  if (auto status = ValidateSparseScores(scores); !status.ok()) return status;
  // Gumbel-max: P(row) ∝ exp(eps0 u / (2Δ)) is the argmax of u + (2Δ/eps0) Gumbel
  // (McSherry & Talwar 2007; Durfee & Rogers 2019, Lemma 4.2).
  const double gumbel_scale = 2.0 * sensitivity_ / epsilon_per_pick();
  struct Candidate {
    double noisy_score;
    int64_t row;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(scores.rows.size() + static_cast<size_t>(k_));
  for (size_t i = 0; i < scores.rows.size(); ++i) {
    // Gumbel = -log(Exp(1)).
    candidates.push_back(
        {scores.scores[i] - gumbel_scale * std::log(StandardExponential(rng)), scores.rows[i]});
  }
  const int64_t num_listed = static_cast<int64_t>(scores.rows.size());
  const int64_t num_zero = scores.num_rows - num_listed;
  const int64_t zero_picks = std::min<int64_t>(k_, num_zero);
  if (zero_picks > 0) {
    // The rows of the zero_picks largest zero-score Gumbels: a uniform random subset.
    std::vector<int64_t> zero_rows;
    zero_rows.reserve(static_cast<size_t>(zero_picks));
    if (2 * (num_listed + zero_picks) > scores.num_rows) {
      // Small table: enumerate the zero rows, partial Fisher-Yates shuffle.
      absl::flat_hash_set<int64_t> listed(scores.rows.begin(), scores.rows.end());
      std::vector<int64_t> all_zero;
      all_zero.reserve(static_cast<size_t>(num_zero));
      for (int64_t r = 0; r < scores.num_rows; ++r) {
        if (!listed.contains(r)) all_zero.push_back(r);
      }
      for (int64_t j = 0; j < zero_picks; ++j) {
        const int64_t pick =
            j + static_cast<int64_t>(UniformUint64Below(rng, static_cast<uint64_t>(num_zero - j)));
        std::swap(all_zero[static_cast<size_t>(j)], all_zero[static_cast<size_t>(pick)]);
        zero_rows.push_back(all_zero[static_cast<size_t>(j)]);
      }
    } else {
      // Large table: rejection sampling of distinct unlisted rows; each try succeeds with
      // probability >= 1/2, so the expected cost is O(zero_picks).
      absl::flat_hash_set<int64_t> taken(scores.rows.begin(), scores.rows.end());
      taken.reserve(static_cast<size_t>(num_listed + zero_picks));
      while (static_cast<int64_t>(zero_rows.size()) < zero_picks) {
        const int64_t row = static_cast<int64_t>(
            UniformUint64Below(rng, static_cast<uint64_t>(scores.num_rows)));
        if (taken.insert(row).second) zero_rows.push_back(row);
      }
    }
    // The zero_picks largest of num_zero i.i.d. Gumbels: -log of the smallest
    // exponentials, E_(j) = sum_{i<=j} X_i / (n0 - i + 1) (Rényi's representation).
    double order_statistic = 0;
    for (int64_t j = 0; j < zero_picks; ++j) {
      order_statistic += StandardExponential(rng) / static_cast<double>(num_zero - j);
      candidates.push_back(
          {-gumbel_scale * std::log(order_statistic), zero_rows[static_cast<size_t>(j)]});
    }
  }
  const size_t k = std::min(candidates.size(), static_cast<size_t>(k_));
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(k),
                    candidates.end(), [](const Candidate& a, const Candidate& b) {
                      return a.noisy_score > b.noisy_score;
                    });
  std::vector<int64_t> selected(k);
  for (size_t i = 0; i < k; ++i) selected[i] = candidates[i].row;
  return selected;
}

}  // namespace dpkit::mechanisms
