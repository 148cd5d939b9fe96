#include "dpkit/mechanisms/selection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/mechanisms/event_or_die.h"

namespace dpkit::mechanisms {
namespace {

absl::Status CheckEpsilonAndSensitivity(double epsilon, double sensitivity) {
  if (!(std::isfinite(epsilon) && epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be finite and > 0, got ", epsilon));
  }
  if (!(std::isfinite(sensitivity) && sensitivity > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sensitivity must be finite and > 0, got ", sensitivity));
  }
  return absl::OkStatus();
}

absl::Status NonFiniteScore(size_t i, double score) {
  return absl::InvalidArgumentError(
      absl::StrCat("scores must be finite, got ", score, " at index ", i));
}


// Uniform in the open interval (0, 1): (k + 1/2) 2^-53.
inline double OpenUniform(uint64_t w) { return (static_cast<double>(w >> 11) + 0.5) * 0x1.0p-53; }
// Standard Gumbel: -ln(-ln U).
inline double Gumbel(uint64_t w) { return -std::log(-std::log(OpenUniform(w))); }
// Exp(1): -ln U.
inline double Exponential(uint64_t w) { return -std::log(OpenUniform(w)); }
// Laplace(1): sign from bit 0, magnitude Exp(1) from the top 53 bits.
inline double Laplace(uint64_t w) { return (w & 1) ? -Exponential(w) : Exponential(w); }

}  // namespace

absl::StatusOr<PrivateSelection> PrivateSelection::Create(double epsilon, double sensitivity,
                                                          SelectionSampler sampler,
                                                          bool monotonic) {
  absl::Status status = CheckEpsilonAndSensitivity(epsilon, sensitivity);
  if (!status.ok()) return status;
  return PrivateSelection(epsilon, sensitivity, sampler, monotonic);
}

accounting::Event PrivateSelection::event() const {
  // The exponential mechanism is epsilon-BR (see the header); permute-and-flip and
  // Laplace report-noisy-max are accounted as pure epsilon-DP.
  if (sampler_ == SelectionSampler::kExponentialGumbel) {
    return EventOrDie(accounting::Event::BoundedRange(epsilon_));
  }
  return EventOrDie(accounting::Event::PureDp(epsilon_));
}

template <typename T>
absl::StatusOr<size_t> PrivateSelection::SelectImpl(absl::Span<const T> scores,
                                                    RandomGenerator& rng) const {
  if (scores.empty()) return absl::InvalidArgumentError("scores must not be empty");
  // argmax_i c u_i + N_i with c = eps / (2 Delta) (eps / Delta when monotonic) and
  // N_i standard Gumbel / Exp(1) / Laplace(1): the three samplers above, rescaled.
  const double c = epsilon_ / ((monotonic_ ? 1.0 : 2.0) * sensitivity_);
  BufferedWords<512> words(rng);
  size_t best = 0;
  double best_value = -INFINITY;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double u = static_cast<double>(scores[i]);
    if (!std::isfinite(u)) return NonFiniteScore(i, u);
    const uint64_t w = words.Next();
    double noise;
    switch (sampler_) {
      case SelectionSampler::kExponentialGumbel: noise = Gumbel(w); break;
      case SelectionSampler::kPermuteAndFlip: noise = Exponential(w); break;
      default: noise = Laplace(w); break;
    }
    const double value = c * u + noise;
    if (value > best_value) {
      best_value = value;
      best = i;
    }
  }
  return best;
}

absl::StatusOr<size_t> PrivateSelection::Select(absl::Span<const double> scores,
                                                RandomGenerator& rng) const {
  return SelectImpl(scores, rng);
}
absl::StatusOr<size_t> PrivateSelection::Select(absl::Span<const float> scores,
                                                RandomGenerator& rng) const {
  return SelectImpl(scores, rng);
}

absl::StatusOr<std::vector<double>> PrivateSelection::ExponentialProbabilities(
    absl::Span<const double> scores) const {
  if (scores.empty()) return absl::InvalidArgumentError("scores must not be empty");
  const double c = epsilon_ / ((monotonic_ ? 1.0 : 2.0) * sensitivity_);
  double max_score = -INFINITY;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!std::isfinite(scores[i])) return NonFiniteScore(i, scores[i]);
    max_score = std::max(max_score, scores[i]);
  }
  std::vector<double> p(scores.size());
  double total = 0.0;
  for (size_t i = 0; i < scores.size(); ++i) {
    p[i] = std::exp(c * (scores[i] - max_score));  // McSherry & Talwar 2007, Def. 2
    total += p[i];
  }
  for (double& v : p) v /= total;
  return p;
}

absl::StatusOr<TopKSelection> TopKSelection::Create(double epsilon, size_t k,
                                                    double sensitivity, TopKMethod method,
                                                    bool monotonic) {
  absl::Status status = CheckEpsilonAndSensitivity(epsilon, sensitivity);
  if (!status.ok()) return status;
  if (k < 1) return absl::InvalidArgumentError("k must be >= 1, got 0");
  return TopKSelection(epsilon, k, sensitivity, method, monotonic);
}

accounting::Event TopKSelection::event() const {
  return EventOrDie(accounting::Event::SelfComposed(
      EventOrDie(accounting::Event::BoundedRange(epsilon_ / static_cast<double>(k_))),
      static_cast<int64_t>(k_)));
}

template <typename T>
absl::StatusOr<std::vector<size_t>> TopKSelection::SelectImpl(absl::Span<const T> scores,
                                                              RandomGenerator& rng) const {
  if (scores.size() < k_) {
    return absl::InvalidArgumentError(
        absl::StrCat("k must be <= the number of scores (", scores.size(), "), got ", k_));
  }
  // Each of the k selections is an exponential mechanism with eps/k.
  const double c = epsilon_ / static_cast<double>(k_) / ((monotonic_ ? 1.0 : 2.0) * sensitivity_);
  BufferedWords<512> words(rng);
  std::vector<size_t> selected;
  selected.reserve(k_);
  if (method_ == TopKMethod::kPeeling) {
    absl::flat_hash_set<size_t> taken;
    for (size_t round = 0; round < k_; ++round) {
      size_t best = 0;
      double best_value = -INFINITY;
      for (size_t i = 0; i < scores.size(); ++i) {
        const double u = static_cast<double>(scores[i]);
        if (!std::isfinite(u)) return NonFiniteScore(i, u);
        if (taken.contains(i)) continue;
        const double value = c * u + Gumbel(words.Next());
        if (value > best_value) {
          best_value = value;
          best = i;
        }
      }
      taken.insert(best);
      selected.push_back(best);
    }
    return selected;
  }
  // One shot: the k largest of c u_i + Gumbel, kept in a min-heap of size k.
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double u = static_cast<double>(scores[i]);
    if (!std::isfinite(u)) return NonFiniteScore(i, u);
    const double value = c * u + Gumbel(words.Next());
    if (heap.size() < k_) {
      heap.emplace(value, i);
    } else if (value > heap.top().first) {
      heap.pop();
      heap.emplace(value, i);
    }
  }
  selected.resize(k_);
  for (size_t j = k_; j-- > 0;) {  // pop smallest first: fill from the back
    selected[j] = heap.top().second;
    heap.pop();
  }
  return selected;
}

absl::StatusOr<std::vector<size_t>> TopKSelection::Select(absl::Span<const double> scores,
                                                          RandomGenerator& rng) const {
  return SelectImpl(scores, rng);
}
absl::StatusOr<std::vector<size_t>> TopKSelection::Select(absl::Span<const float> scores,
                                                          RandomGenerator& rng) const {
  return SelectImpl(scores, rng);
}

}  // namespace dpkit::mechanisms
