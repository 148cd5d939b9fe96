#include "optim/sparse/sparse_privacy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "boost/math/distributions/normal.hpp"

namespace dpkit::optim::sparse {
namespace {

constexpr int kMaxOrder = 256;

absl::Status Validate(const SparseDpSgdPrivacyParams& p, double delta) {
  if (!(p.sampling_rate > 0 && p.sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate must be in (0, 1], got ", p.sampling_rate));
  }
  if (!std::isfinite(p.noise_multiplier) || p.noise_multiplier <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise_multiplier must be finite and > 0, got ", p.noise_multiplier));
  }
  if (!std::isfinite(p.selection_epsilon_per_pick) || p.selection_epsilon_per_pick < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "selection epsilon per pick must be finite and >= 0, got ", p.selection_epsilon_per_pick));
  }
  if (p.selection_picks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection picks must be >= 1, got ", p.selection_picks));
  }
  if (p.steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("steps must be >= 1, got ", p.steps));
  }
  if (!(delta > 0 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta must be in (0, 1), got ", delta));
  }
  return absl::OkStatus();
}

// Balle & Wang 2018, Thm. 8, sensitivity 1, sigma = z.
double AnalyticGaussianDelta(double z, double epsilon) {
  const boost::math::normal standard;
  const double a = boost::math::cdf(standard, 1.0 / (2.0 * z) - epsilon * z);
  // e^eps Phi(-1/(2z) - eps z) in log space (the cdf underflows before e^eps overflows).
  const double tail = boost::math::cdf(standard, -1.0 / (2.0 * z) - epsilon * z);
  const double b = tail > 0 ? std::exp(epsilon + std::log(tail)) : 0.0;
  return std::max(0.0, a - b);
}

// log(exp(a) + exp(b)).
double LogAdd(double a, double b) {
  if (a == -std::numeric_limits<double>::infinity()) return b;
  if (b == -std::numeric_limits<double>::infinity()) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

double LogBinomial(int n, int k) {
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

}  // namespace

absl::StatusOr<double> AnalyticGaussianEpsilon(double noise_multiplier, double delta) {
  if (!std::isfinite(noise_multiplier) || noise_multiplier <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise_multiplier must be finite and > 0, got ", noise_multiplier));
  }
  if (!(delta > 0 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta must be in (0, 1), got ", delta));
  }
  if (AnalyticGaussianDelta(noise_multiplier, 0.0) <= delta) return 0.0;
  // delta(eps) is decreasing in eps: bracket, then bisect keeping delta(hi) <= delta.
  double lo = 0, hi = 1;
  while (AnalyticGaussianDelta(noise_multiplier, hi) > delta) {
    lo = hi;
    hi *= 2;
    if (hi > 1e6) return absl::InvalidArgumentError("epsilon of the Gaussian is above 1e6");
  }
  while (hi - lo > 1e-12 * hi) {
    const double mid = 0.5 * (lo + hi);
    (AnalyticGaussianDelta(noise_multiplier, mid) > delta ? lo : hi) = mid;
  }
  return hi;
}

double PoissonSubsampledRdpUpperBound(double q, const std::vector<double>& inner_rdp,
                                      int order) {
  // Zhu & Wang 2019, Thm. 6:
  // (a-1) eps(a) <= log[ (1-q)^(a-1) (a q - q + 1) + C(a,2) q^2 (1-q)^(a-2) e^{eps(2)}
  //                      + 3 sum_{l=3}^{a} C(a,l) q^l (1-q)^(a-l) e^{(l-1) eps(l)} ].
  const int a = order;
  if (q >= 1.0) {
    // Only the l = a term survives.
    return (std::log(3.0) + (a - 1) * inner_rdp[a]) / (a - 1);
  }
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  double log_sum = (a - 1) * log_1mq + std::log1p((a - 1) * q);
  log_sum = LogAdd(log_sum, LogBinomial(a, 2) + 2 * log_q + (a - 2) * log_1mq + inner_rdp[2]);
  for (int l = 3; l <= a; ++l) {
    log_sum = LogAdd(log_sum, std::log(3.0) + LogBinomial(a, l) + l * log_q +
                                  (a - l) * log_1mq + (l - 1) * inner_rdp[l]);
  }
  return log_sum / (a - 1);
}

absl::StatusOr<double> StrongCompositionEpsilon(const SparseDpSgdPrivacyParams& p,
                                                double delta) {
  if (auto s = Validate(p, delta); !s.ok()) return s;
  const double steps = static_cast<double>(p.steps);
  const double q = p.sampling_rate;
  // Half of delta for the per-step deltas (T q delta_g), half as composition slack.
  const double delta_gaussian = std::min(0.5, delta / (2.0 * steps * q));
  const double delta_slack = delta / 2.0;
  absl::StatusOr<double> eps_gaussian = AnalyticGaussianEpsilon(p.noise_multiplier, delta_gaussian);
  if (!eps_gaussian.ok()) return eps_gaussian.status();
  // Basic composition of the selection and the Gaussian within a step.
  const double eps_inner =
      static_cast<double>(p.selection_picks) * p.selection_epsilon_per_pick + *eps_gaussian;
  // Amplification by Poisson sampling.
  const double eps_step = std::log1p(q * std::expm1(eps_inner));
  // Dwork & Roth 2014, Thm. 3.20 (advanced composition) and Thm. 3.16 (basic).
  const double advanced = std::sqrt(2.0 * steps * std::log(1.0 / delta_slack)) * eps_step +
                          steps * eps_step * std::expm1(eps_step);
  return std::min(advanced, steps * eps_step);
}

absl::StatusOr<double> RdpEpsilon(const SparseDpSgdPrivacyParams& p, double delta) {
  if (auto s = Validate(p, delta); !s.ok()) return s;
  const double z = p.noise_multiplier;
  const double e0 = p.selection_epsilon_per_pick;
  const double picks = static_cast<double>(p.selection_picks);
  const double zcdp_factor = p.selection_bounded_range ? 1.0 / 8.0 : 1.0 / 2.0;
  std::vector<double> inner(kMaxOrder + 1, 0.0);
  for (int l = 2; l <= kMaxOrder; ++l) {
    inner[l] = l / (2.0 * z * z) + picks * std::min(e0, l * e0 * e0 * zcdp_factor);
  }
  double best = std::numeric_limits<double>::infinity();
  for (int a = 2; a <= kMaxOrder; ++a) {
    const double rdp =
        static_cast<double>(p.steps) * PoissonSubsampledRdpUpperBound(p.sampling_rate, inner, a);
    // Balle et al. 2020, Thm. 21.
    const double eps = rdp + std::log((a - 1.0) / a) - (std::log(delta) + std::log(a)) / (a - 1.0);
    best = std::min(best, eps);
  }
  return std::max(0.0, best);
}

}  // namespace dpkit::optim::sparse
