#include "optim/sparse/private_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace dpkit::optim::sparse {
namespace {

using mechanisms::RandomGenerator;

// Uniform in the open interval (0, 1): (k + 1/2) 2^-53, k uniform in [0, 2^53).
double OpenUniform(uint64_t word) {
  return (static_cast<double>(word >> 11) + 0.5) * 0x1.0p-53;
}

// Exp(1) by inversion.
double StandardExponential(RandomGenerator& rng) { return -std::log(OpenUniform(rng.NextUint64())); }

// Lap(scale): a random sign (the low bit, unused by OpenUniform) times Exp(scale).
double Laplace(RandomGenerator& rng, double scale) {
  const uint64_t word = rng.NextUint64();
  const double magnitude = -scale * std::log(OpenUniform(word));
  return (word & 1) ? magnitude : -magnitude;
}

// P(Lap(scale) >= x).
double LaplaceUpperTail(double x, double scale) {
  return x >= 0 ? 0.5 * std::exp(-x / scale) : 1.0 - 0.5 * std::exp(x / scale);
}

// Number of failures before the first success of Bernoulli(p) trials, by inversion
// (as a double: it may exceed every table size when p is tiny).
double GeometricFailures(RandomGenerator& rng, double p) {
  if (p >= 1.0) return 0.0;
  if (p <= 0.0) return std::numeric_limits<double>::infinity();
  return std::floor(std::log(OpenUniform(rng.NextUint64())) / std::log1p(-p));
}

absl::Status CheckPositive(const char* name, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be finite and > 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSparseScores(const SparseScores& scores) {
  if (scores.num_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_rows must be >= 1, got ", scores.num_rows));
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

// ---------------------------------------------------------------------------------
// Exponential mechanism, top-k.

absl::StatusOr<std::unique_ptr<ExponentialTopKSelector>> ExponentialTopKSelector::Create(
    int64_t num_selected, double epsilon, double sensitivity) {
  if (num_selected < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_selected must be >= 1, got ", num_selected));
  }
  if (auto s = CheckPositive("selection_epsilon", epsilon); !s.ok()) return s;
  if (auto s = CheckPositive("selection sensitivity", sensitivity); !s.ok()) return s;
  return std::unique_ptr<ExponentialTopKSelector>(
      new ExponentialTopKSelector(num_selected, epsilon, sensitivity));
}

accounting::Event ExponentialTopKSelector::PrivacyEvent() const {
  // Validated parameters: the factories cannot fail here.
  return accounting::Event::SelfComposed(*accounting::Event::PureDp(epsilon_per_pick()),
                                         num_selected_)
      .value();
}

absl::StatusOr<std::vector<int64_t>> ExponentialTopKSelector::Select(
    const SparseScores& scores, RandomGenerator& rng) const {
  if (auto status = ValidateSparseScores(scores); !status.ok()) return status;
  // Gumbel-max: P(row) ∝ exp(eps0 u / (2Δ)) equals argmax of u + (2Δ/eps0) Gumbel
  // (McSherry & Talwar 2007; Durfee & Rogers 2019, Sec. 4).
  const double gumbel_scale = 2.0 * sensitivity_ / epsilon_per_pick();
  struct Candidate {
    double noisy_score;
    int64_t row;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(scores.rows.size() + static_cast<size_t>(num_selected_));
  for (size_t i = 0; i < scores.rows.size(); ++i) {
    // Gumbel = -log(Exp(1)).
    candidates.push_back(
        {scores.scores[i] - gumbel_scale * std::log(StandardExponential(rng)), scores.rows[i]});
  }
  const int64_t num_listed = static_cast<int64_t>(scores.rows.size());
  const int64_t num_zero = scores.num_rows - num_listed;
  const int64_t zero_picks = std::min<int64_t>(num_selected_, num_zero);
  if (zero_picks > 0) {
    // The zero_picks largest of num_zero i.i.d. Gumbels: -log of the smallest
    // exponentials, E_(j) = sum_{i<=j} X_i / (n0 - i + 1) (Rényi representation).
    std::vector<int64_t> zero_rows;
    zero_rows.reserve(static_cast<size_t>(zero_picks));
    if (2 * (num_listed + zero_picks) > scores.num_rows) {
      // Dense table: enumerate the zero rows and take a uniform subset by a partial
      // Fisher-Yates shuffle.
      absl::flat_hash_set<int64_t> listed(scores.rows.begin(), scores.rows.end());
      std::vector<int64_t> all_zero;
      all_zero.reserve(static_cast<size_t>(num_zero));
      for (int64_t r = 0; r < scores.num_rows; ++r) {
        if (!listed.contains(r)) all_zero.push_back(r);
      }
      for (int64_t j = 0; j < zero_picks; ++j) {
        const int64_t pick =
            j + static_cast<int64_t>(mechanisms::UniformUint64Below(
                    rng, static_cast<uint64_t>(num_zero - j)));
        std::swap(all_zero[static_cast<size_t>(j)], all_zero[static_cast<size_t>(pick)]);
        zero_rows.push_back(all_zero[static_cast<size_t>(j)]);
      }
    } else {
      // Sparse table: rejection sampling of distinct unlisted rows; each try succeeds
      // with probability >= 1/2, so the expected cost is O(zero_picks).
      absl::flat_hash_set<int64_t> taken(scores.rows.begin(), scores.rows.end());
      taken.reserve(static_cast<size_t>(num_listed + zero_picks));
      while (static_cast<int64_t>(zero_rows.size()) < zero_picks) {
        const int64_t row = static_cast<int64_t>(
            mechanisms::UniformUint64Below(rng, static_cast<uint64_t>(scores.num_rows)));
        if (taken.insert(row).second) zero_rows.push_back(row);
      }
    }
    double order_statistic = 0;
    for (int64_t j = 0; j < zero_picks; ++j) {
      order_statistic += StandardExponential(rng) / static_cast<double>(num_zero - j);
      candidates.push_back({-gumbel_scale * std::log(order_statistic),
                            zero_rows[static_cast<size_t>(j)]});
    }
  }
  const size_t k = std::min(candidates.size(), static_cast<size_t>(num_selected_));
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(k),
                    candidates.end(), [](const Candidate& a, const Candidate& b) {
                      return a.noisy_score > b.noisy_score;
                    });
  std::vector<int64_t> selected(k);
  for (size_t i = 0; i < k; ++i) selected[i] = candidates[i].row;
  return selected;
}

// ---------------------------------------------------------------------------------
// Sparse vector technique.

SparseVectorSelector::SparseVectorSelector(int64_t c, double epsilon, double threshold,
                                           double sensitivity)
    : max_selected_(c), epsilon_(epsilon), threshold_(threshold), sensitivity_(sensitivity) {
  // Lyu, Su & Li 2017, Sec. 4.2: eps1 : eps2 = 1 : (2c)^(2/3).
  const double ratio = std::pow(2.0 * static_cast<double>(c), 2.0 / 3.0);
  threshold_epsilon_ = epsilon / (1.0 + ratio);
  query_epsilon_ = epsilon - threshold_epsilon_;
}

absl::StatusOr<std::unique_ptr<SparseVectorSelector>> SparseVectorSelector::Create(
    int64_t max_selected, double epsilon, double threshold, double sensitivity) {
  if (max_selected < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_selected must be >= 1, got ", max_selected));
  }
  if (auto s = CheckPositive("selection_epsilon", epsilon); !s.ok()) return s;
  if (auto s = CheckPositive("selection sensitivity", sensitivity); !s.ok()) return s;
  if (!std::isfinite(threshold)) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection_threshold must be finite, got ", threshold));
  }
  return std::unique_ptr<SparseVectorSelector>(
      new SparseVectorSelector(max_selected, epsilon, threshold, sensitivity));
}

accounting::Event SparseVectorSelector::PrivacyEvent() const {
  return accounting::Event::PureDp(epsilon_).value();
}

absl::StatusOr<std::vector<int64_t>> SparseVectorSelector::Select(const SparseScores& scores,
                                                                  RandomGenerator& rng) const {
  if (auto status = ValidateSparseScores(scores); !status.ok()) return status;
  // Lyu, Su & Li 2017, Alg. 1: rho ~ Lap(Δ/eps1), nu_i ~ Lap(2cΔ/eps2).
  const double noisy_threshold = threshold_ + Laplace(rng, sensitivity_ / threshold_epsilon_);
  const double query_scale =
      2.0 * static_cast<double>(max_selected_) * sensitivity_ / query_epsilon_;
  // Each zero-score row passes independently with this probability.
  const double zero_pass = LaplaceUpperTail(noisy_threshold, query_scale);

  std::vector<std::pair<int64_t, double>> listed(scores.rows.size());
  for (size_t i = 0; i < listed.size(); ++i) listed[i] = {scores.rows[i], scores.scores[i]};
  std::sort(listed.begin(), listed.end());

  std::vector<int64_t> selected;
  int64_t position = 0;  // next row to examine
  // Examines the zero-score rows [position, end): Geometric skips to each pass.
  auto scan_zero_rows = [&](int64_t end) {
    while (position < end && static_cast<int64_t>(selected.size()) < max_selected_) {
      const double skip = GeometricFailures(rng, zero_pass);
      if (skip >= static_cast<double>(end - position)) break;
      position += static_cast<int64_t>(skip);
      selected.push_back(position);
      ++position;
    }
    position = end;
  };
  for (const auto& [row, score] : listed) {
    if (static_cast<int64_t>(selected.size()) >= max_selected_) break;
    scan_zero_rows(row);
    if (static_cast<int64_t>(selected.size()) >= max_selected_) break;
    if (score + Laplace(rng, query_scale) >= noisy_threshold) selected.push_back(row);
    position = row + 1;
  }
  if (static_cast<int64_t>(selected.size()) < max_selected_) scan_zero_rows(scores.num_rows);
  return selected;
}

}  // namespace dpkit::optim::sparse
