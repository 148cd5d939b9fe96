#include "dpkit/optim/sparse/sparse_privacy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "boost/math/distributions/normal.hpp"

namespace dpkit::optim::sparse {
namespace {

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

absl::StatusOr<accounting::Event> SparseDpSgdEvent(const SparseDpSgdPrivacyParams& p) {
  if (auto s = Validate(p, 0.5); !s.ok()) return s;
  const double e0 = p.selection_epsilon_per_pick;
  accounting::Result<accounting::Event> pick = p.selection_bounded_range
                                                   ? accounting::Event::BoundedRange(e0)
                                                   : accounting::Event::PureDp(e0);
  auto selection = accounting::Event::SelfComposed(*pick, p.selection_picks);
  auto gaussian = accounting::Event::Gaussian(p.noise_multiplier);
  auto inner = accounting::Event::Composed({*selection, *gaussian});
  auto step = accounting::Event::PoissonSampled(p.sampling_rate, *inner);
  auto run = accounting::Event::SelfComposed(*step, p.steps);
  if (!run.ok()) return absl::InvalidArgumentError(run.error());  // validated above
  return *std::move(run);
}

}  // namespace dpkit::optim::sparse
