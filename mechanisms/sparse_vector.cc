#include "dpkit/mechanisms/sparse_vector.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpkit::mechanisms {
namespace {
// Laplace(scale) from one word: sign bit 0, magnitude from the top 53 bits.
inline double LaplaceFromWord(uint64_t w, double scale) {
  const double magnitude = -scale * std::log((static_cast<double>(w >> 11) + 0.5) * 0x1.0p-53);
  return (w & 1) ? -magnitude : magnitude;
}
}  // namespace

absl::StatusOr<SparseVector> SparseVector::Create(double epsilon, double threshold,
                                                  size_t max_positives, double sensitivity,
                                                  bool release_values) {
  if (!(std::isfinite(epsilon) && epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be finite and > 0, got ", epsilon));
  }
  if (!std::isfinite(threshold)) {
    return absl::InvalidArgumentError(absl::StrCat("threshold must be finite, got ", threshold));
  }
  if (max_positives < 1) {
    return absl::InvalidArgumentError("max_positives must be >= 1, got 0");
  }
  if (!(std::isfinite(sensitivity) && sensitivity > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sensitivity must be finite and > 0, got ", sensitivity));
  }
  return SparseVector(epsilon, threshold, max_positives, sensitivity, release_values);
}

double SparseVector::selection_epsilon() const {
  return release_values_ ? epsilon_ * 8.0 / 9.0 : epsilon_;
}
double SparseVector::threshold_noise_scale() const {
  // Dwork & Roth 2014, Alg. 2: sigma = 2 c Delta / eps.
  return 2.0 * static_cast<double>(max_positives_) * sensitivity_ / selection_epsilon();
}
double SparseVector::query_noise_scale() const { return 2.0 * threshold_noise_scale(); }
double SparseVector::value_noise_scale() const {
  if (!release_values_) return 0.0;
  // Dwork & Roth 2014, Alg. 3: Lap(sigma(eps2)), eps2 = 2 eps / 9.
  return 2.0 * static_cast<double>(max_positives_) * sensitivity_ / (epsilon_ * 2.0 / 9.0);
}

accounting::Event SparseVector::event() const {
  auto event = accounting::Event::PureDp(epsilon_);
  if (!event.ok()) std::abort();  // epsilon validated in Create
  return *event;
}

template <typename T>
absl::StatusOr<SparseVectorResult> SparseVector::RunImpl(absl::Span<const T> scores,
                                                         RandomGenerator& rng) const {
  SparseVectorResult result;
  const double rho_scale = threshold_noise_scale();
  const double nu_scale = query_noise_scale();
  double noisy_threshold = threshold_ + LaplaceFromWord(rng.NextUint64(), rho_scale);
  constexpr size_t kChunk = 512;
  uint64_t words[kChunk];
  size_t position = kChunk;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double u = static_cast<double>(scores[i]);
    if (!std::isfinite(u)) {
      return absl::InvalidArgumentError(
          absl::StrCat("scores must be finite, got ", u, " at index ", i));
    }
    if (position == kChunk) {
      rng.Fill(words, kChunk);
      position = 0;
    }
    result.scores_examined = i + 1;
    if (u + LaplaceFromWord(words[position++], nu_scale) >= noisy_threshold) {
      result.indices.push_back(i);
      if (release_values_) {
        // Fresh noise, independent of the comparison noise (releasing u + nu_i
        // would break privacy; Lyu, Su, Li 2017, Sec. 3.4).
        result.noisy_values.push_back(u + LaplaceFromWord(rng.NextUint64(), value_noise_scale()));
      }
      if (result.indices.size() == max_positives_) break;
      // Dwork & Roth 2014, Alg. 2: the threshold noise is redrawn after each positive.
      noisy_threshold = threshold_ + LaplaceFromWord(rng.NextUint64(), rho_scale);
    }
  }
  return result;
}

absl::StatusOr<SparseVectorResult> SparseVector::Run(absl::Span<const double> scores,
                                                     RandomGenerator& rng) const {
  return RunImpl(scores, rng);
}
absl::StatusOr<SparseVectorResult> SparseVector::Run(absl::Span<const float> scores,
                                                     RandomGenerator& rng) const {
  return RunImpl(scores, rng);
}

}  // namespace dpkit::mechanisms
