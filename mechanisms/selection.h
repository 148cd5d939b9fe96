// Private selection: the exponential mechanism, permute-and-flip, report-noisy-max
// and top-k, on spans of scores (10^6 candidates without copying the scores).
//
// Scores u_i have sensitivity Delta: |u_i(D) - u_i(D')| <= Delta for neighbours.
// With `monotonic` (all scores move in the same direction between neighbours, e.g.
// counts), the factor 2 in the exponents is dropped (McSherry & Talwar 2007, Thm. 6;
// Dwork & Roth 2014, Claim 3.9 / Thm. 3.10 remark).
//
// Each mechanism is epsilon-DP. The exponential mechanism (and top-k built from it) is
// moreover epsilon-bounded-range (Durfee & Rogers 2019; Dong, Durfee, Rogers 2020):
// the log-probability ratio between neighbours varies over an interval of length eps,
// since each exponent moves by at most eps/2 either way (by at most eps, all in one
// direction, with `monotonic`) and the normaliser shifts all of them alike. It reports
// BoundedRange events, whose RDP accountant (accounting/rdp.h RdpBoundedRange) is
// tighter than pure DP; permute-and-flip and report-noisy-max with Laplace noise are
// not known to be BR and report PureDp. Non-finite scores are an InvalidArgument error
// (never a silent choice).
#ifndef DPKIT_MECHANISMS_SELECTION_H_
#define DPKIT_MECHANISMS_SELECTION_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

enum class SelectionSampler {
  // Exponential mechanism (McSherry & Talwar 2007): P(i) proportional to
  // exp(eps u_i / (2 Delta)), sampled as argmax_i (eps u_i/(2 Delta) + G_i) with
  // i.i.d. standard Gumbel G_i (the Gumbel-max trick; Durfee & Rogers 2019, Lemma 4.2).
  kExponentialGumbel,
  // Permute-and-flip (McKenna & Sheldon 2020), sampled as report-noisy-max with
  // Exponential(2 Delta/eps) noise, which has the same output distribution
  // (Ding, Kifer, Steinke, et al. 2021, Thm. 1). Never worse in expected error than
  // the exponential mechanism.
  kPermuteAndFlip,
  // Report-noisy-max with Laplace(2 Delta/eps) noise (Dwork & Roth 2014, Sec. 3.3).
  kReportNoisyMaxLaplace,
};

// One epsilon-DP selection of the index of a large score.
class PrivateSelection {
 public:
  static absl::StatusOr<PrivateSelection> Create(double epsilon, double sensitivity,
                                                 SelectionSampler sampler,
                                                 bool monotonic = false);
  // The selected index. InvalidArgument for an empty span or a non-finite score.
  absl::StatusOr<size_t> Select(absl::Span<const double> scores, RandomGenerator& rng) const;
  absl::StatusOr<size_t> Select(absl::Span<const float> scores, RandomGenerator& rng) const;
  // Probabilities of the exponential mechanism, P(i) = softmax(eps u / (2 Delta))_i
  // (or eps u / Delta when monotonic), computed stably; for tests and tools.
  absl::StatusOr<std::vector<double>> ExponentialProbabilities(
      absl::Span<const double> scores) const;
  // BoundedRange(epsilon) for kExponentialGumbel, PureDp(epsilon) for the others.
  accounting::Event event() const;
  double epsilon() const { return epsilon_; }

 private:
  PrivateSelection(double epsilon, double sensitivity, SelectionSampler sampler,
                   bool monotonic)
      : epsilon_(epsilon), sensitivity_(sensitivity), sampler_(sampler),
        monotonic_(monotonic) {}
  template <typename T>
  absl::StatusOr<size_t> SelectImpl(absl::Span<const T> scores, RandomGenerator& rng) const;
  double epsilon_;
  double sensitivity_;
  SelectionSampler sampler_;
  bool monotonic_;
};

enum class TopKMethod {
  // k rounds of the exponential mechanism with eps/k each, removing the winner
  // (Durfee & Rogers 2019, "peeling").
  kPeeling,
  // One pass: add Gumbel noise with scale 2 Delta k / eps once and report the k
  // largest; the same output distribution as peeling (Durfee & Rogers 2019, Lemma 4.2).
  kOneShotGumbel,
};

// epsilon-DP selection of k distinct indices (in selection order).
class TopKSelection {
 public:
  static absl::StatusOr<TopKSelection> Create(double epsilon, size_t k, double sensitivity,
                                              TopKMethod method, bool monotonic = false);
  // InvalidArgument if the span has fewer than k scores or a non-finite score.
  absl::StatusOr<std::vector<size_t>> Select(absl::Span<const double> scores,
                                             RandomGenerator& rng) const;
  absl::StatusOr<std::vector<size_t>> Select(absl::Span<const float> scores,
                                             RandomGenerator& rng) const;
  // SelfComposed(BoundedRange(epsilon / k), k): both methods have the law of k adaptive
  // exponential mechanisms with epsilon/k each (Durfee & Rogers 2019, Lemma 4.2), each
  // (epsilon/k)-BR; pure epsilon-DP by basic composition.
  accounting::Event event() const;

 private:
  TopKSelection(double epsilon, size_t k, double sensitivity, TopKMethod method,
                bool monotonic)
      : epsilon_(epsilon), k_(k), sensitivity_(sensitivity), method_(method),
        monotonic_(monotonic) {}
  template <typename T>
  absl::StatusOr<std::vector<size_t>> SelectImpl(absl::Span<const T> scores,
                                                 RandomGenerator& rng) const;
  double epsilon_;
  size_t k_;
  double sensitivity_;
  TopKMethod method_;
  bool monotonic_;
};

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_SELECTION_H_
