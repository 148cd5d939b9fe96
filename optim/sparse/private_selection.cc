#include "dpkit/optim/sparse/private_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dpkit::optim::sparse {
namespace {

using mechanisms::RandomGenerator;

// Uniform in the open interval (0, 1): (k + 1/2) 2^-53, k uniform in [0, 2^53).
double OpenUniform(uint64_t word) {
  return (static_cast<double>(word >> 11) + 0.5) * 0x1.0p-53;
}

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
  // Each pick is an exponential mechanism with epsilon/k, hence (epsilon/k)-bounded-range
  // (Durfee & Rogers 2019); the one-shot Gumbel sampler has the law of k adaptive picks.
  return accounting::Event::SelfComposed(*accounting::Event::BoundedRange(epsilon_per_pick()),
                                         num_selected_)
      .value();
}

absl::StatusOr<std::vector<int64_t>> ExponentialTopKSelector::Select(
    const SparseScores& scores, RandomGenerator& rng) const {
  // The sampler lives in mechanisms/ (validated parameters: Create cannot fail here).
  absl::StatusOr<mechanisms::SparseExponentialTopK> sampler =
      mechanisms::SparseExponentialTopK::Create(num_selected_, epsilon_, sensitivity_);
  if (!sampler.ok()) return sampler.status();
  return sampler->Select(scores, rng);
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
