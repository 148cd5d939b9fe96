#include "dpkit/accounting/gdp.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/internal/no_throw_policy.h"
#include "boost/math/special_functions/erf.hpp"
#include "boost/math/tools/toms748_solve.hpp"

namespace dpkit::accounting {
namespace {

using ::dpkit::accounting::internal::NoThrowPolicy;

constexpr long double kSqrt2 = 1.41421356237309504880168872420969808L;
constexpr long double kLogSqrt2Pi = 0.918938533204672741780329736405617640L;
constexpr long double kSqrt2Pi = 2.50662827463100050241576528481104525L;
// Root-finder stopping rule: bracket width below 2^-50 relative.
constexpr int kToleranceBits = 50;
constexpr std::uintmax_t kMaxRootIterations = 200;

std::string Num(double value) { return internal::FormatDouble(value); }

Error RangeError(const char* name, const char* range, double value) {
  return Error{std::string(name) + " must be " + range + ", got " + Num(value)};
}

// Standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2, accurate in both tails.
long double NormalCdf(long double x) {
  return 0.5L * boost::math::erfc(-x / kSqrt2, NoThrowPolicy());
}

// log phi(x), the log standard normal density.
long double LogNormalPdf(long double x) { return -0.5L * x * x - kLogSqrt2Pi; }

// Mills ratio R(t) = Phi(-t) / phi(t) for t >= 0. Below t = 50 the direct quotient
// is exact to long double precision (e^{t^2/2} <= e^1250 fits easily); above it the
// Laplace continued fraction R(t) = 1/(t+ 1/(t+ 2/(t+ 3/(t+ ...)))) (Abramowitz &
// Stegun 26.2.14), evaluated backwards from depth 40, is exact to well below
// long double epsilon (its error decays like (k/t^2)^k).
long double MillsRatio(long double t) {
  if (t < 50.0L) {
    return NormalCdf(-t) * std::exp(0.5L * t * t) * kSqrt2Pi;
  }
  long double tail = t;
  for (int k = 40; k >= 1; --k) tail = t + k / tail;
  return 1.0L / tail;
}

// 1 - t R(t) = -R'(t) for t >= 0 (R' = tR - 1, from phi' = -t phi), without the
// cancellation of the direct difference at large t: there, with the continued
// fraction R(t) = 1/T, T = t + 1/U, U = t + 2/(t + 3/(...)), 1 - t/T = (1/U)/T.
long double MillsComplement(long double t) {
  if (t < 50.0L) return 1.0L - t * MillsRatio(t);
  long double rest = t;
  for (int k = 40; k >= 2; --k) rest = t + k / rest;
  return (1.0L / rest) / (t + 1.0L / rest);
}

// log Phi(x), finite for every finite x.
long double LogNormalCdf(long double x) {
  if (x > -5.0L) return std::log(NormalCdf(x));
  return LogNormalPdf(x) + std::log(MillsRatio(-x));
}

// log delta(eps; mu) for mu > 0, eps >= 0 (Bu et al. 2020, eq. 3.2), in long double.
// With a = -eps/mu + mu/2 and b = -eps/mu - mu/2 one has e^eps phi(b) = phi(a)
// (since b^2/2 - a^2/2 = eps), so for a < 0 (both CDFs in the lower tail)
//   delta = Phi(a) - e^eps Phi(b) = phi(a) [R(-a) - R(-b)]
// with R the Mills ratio: no e^eps overflow and no underflow of Phi. For a >= 0,
// Phi(a) >= 1/2 and the direct difference is well conditioned in long double.
long double LogDeltaLongDouble(long double mu, long double epsilon) {
  const long double a = -epsilon / mu + 0.5L * mu;
  const long double b = -epsilon / mu - 0.5L * mu;
  if (a < 0) {
    // R(-a) - R(-b) = int_{-a}^{-b} (1 - s R(s)) ds over an interval of length mu.
    // For small mu the direct difference cancels (relative error ~1e-19 t / mu), so
    // Simpson's rule on the smooth integrand is used instead: its relative error is
    // ~mu^4 / 2880 < 1e-15 for mu < 1e-3.
    const long double difference =
        mu < 1e-3L ? mu / 6.0L *
                         (MillsComplement(-a) + 4.0L * MillsComplement(epsilon / mu) +
                          MillsComplement(-b))
                   : MillsRatio(-a) - MillsRatio(-b);
    if (!(difference > 0)) return -std::numeric_limits<long double>::infinity();
    return LogNormalPdf(a) + std::log(difference);
  }
  const long double delta = NormalCdf(a) - std::exp(epsilon + LogNormalCdf(b));
  if (!(delta > 0)) return -std::numeric_limits<long double>::infinity();
  return std::log(delta);
}

Result<void> CheckMu(double mu) {
  if (std::isfinite(mu) && mu > 0) return OkResult();
  return RangeError("mu", "finite and > 0", mu);
}

Result<void> CheckEpsilon(double epsilon) {
  if (std::isfinite(epsilon) && epsilon >= 0) return OkResult();
  return RangeError("epsilon", "finite and >= 0", epsilon);
}

Result<void> CheckDelta(double delta) {
  if (delta > 0 && delta < 1) return OkResult();
  return RangeError("delta", "in (0, 1)", delta);
}

}  // namespace

double GaussianTradeoff(double mu, double alpha) {
  if (!(std::isfinite(mu) && mu >= 0) || !(alpha >= 0 && alpha <= 1)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (alpha == 0) return 1.0;
  if (alpha == 1) return 0.0;
  // Phi^{-1}(1 - alpha) = sqrt(2) erfc^{-1}(2 alpha), exact also for tiny alpha.
  const long double quantile =
      kSqrt2 * boost::math::erfc_inv(2.0L * alpha, NoThrowPolicy());
  // Dong, Roth, Su 2019, Sec. 2: G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu).
  return static_cast<double>(NormalCdf(quantile - mu));
}

double ApproxDpTradeoff(double epsilon, double delta, double alpha) {
  if (!(std::isfinite(epsilon) && epsilon >= 0) || !(delta >= 0 && delta <= 1) ||
      !(alpha >= 0 && alpha <= 1)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  // Bu et al. 2020, eq. (2.1): max{0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)}.
  // The middle term is negative once e^eps alpha > 1; skip it to avoid inf - inf.
  double value = std::exp(-epsilon) * (1.0 - delta - alpha);
  if (alpha == 0) {
    value = std::max(value, 1.0 - delta);
  } else if (epsilon + std::log(alpha) < std::log(2.0)) {
    value = std::max(value, 1.0 - delta - std::exp(epsilon) * alpha);
  }
  return std::max(0.0, value);
}

Result<double> GdpLogDelta(double mu, double epsilon) {
  DPKIT_RETURN_IF_ERROR(CheckMu(mu));
  DPKIT_RETURN_IF_ERROR(CheckEpsilon(epsilon));
  return static_cast<double>(LogDeltaLongDouble(mu, epsilon));
}

Result<double> GdpDelta(double mu, double epsilon) {
  Result<double> log_delta = GdpLogDelta(mu, epsilon);
  if (!log_delta.ok()) return log_delta;
  return std::exp(*log_delta);
}

Result<double> GdpEpsilon(double mu, double delta) {
  DPKIT_RETURN_IF_ERROR(CheckMu(mu));
  DPKIT_RETURN_IF_ERROR(CheckDelta(delta));
  // delta(0; mu) = Phi(mu/2) - Phi(-mu/2) = erf(mu / (2 sqrt 2)); any delta at or
  // above it is met with epsilon = 0.
  const long double delta_at_zero =
      boost::math::erf(static_cast<long double>(mu) / (2.0L * kSqrt2), NoThrowPolicy());
  if (delta >= delta_at_zero) return 0.0;
  const long double log_target = std::log(static_cast<long double>(delta));
  // f is strictly decreasing in epsilon: positive at 0, negative past the root.
  auto f = [&](double epsilon) {
    return static_cast<double>(LogDeltaLongDouble(mu, epsilon) - log_target);
  };
  // Starting bracket: delta(eps) <= Phi(-eps/mu + mu/2), which equals delta at
  // eps = mu (mu/2 + z) with z = Phi^{-1}(1 - delta); so the root lies below it.
  // It is still grown adaptively in case rounding puts f(hi) on the wrong side.
  const double z = static_cast<double>(
      kSqrt2 * boost::math::erfc_inv(2.0L * delta, NoThrowPolicy()));
  double hi = std::max(mu * (0.5 * mu + z), 1e-300);
  double f_hi = f(hi);
  for (int grow = 0; f_hi > 0; ++grow) {
    if (grow > 2000 || !std::isfinite(hi)) {
      return Error{"GdpEpsilon: no epsilon found for mu = " + Num(mu) +
                   ", delta = " + Num(delta)};
    }
    hi = 2.0 * hi + 1e-300;
    f_hi = f(hi);
  }
  if (f_hi == 0) return hi;
  const double lo = 0.0;
  const double f_lo = f(lo);
  std::uintmax_t iterations = kMaxRootIterations;
  std::pair<double, double> bracket = boost::math::tools::toms748_solve(
      f, lo, hi, f_lo, f_hi, boost::math::tools::eps_tolerance<double>(kToleranceBits),
      iterations, NoThrowPolicy());
  // Return the end of the bracket on the safe side: f(second) <= 0, i.e.
  // delta(second) <= delta.
  double epsilon = bracket.second;
  if (f(epsilon) > 0) epsilon = hi;
  return epsilon;
}

Result<double> GdpMu(double epsilon, double delta) {
  DPKIT_RETURN_IF_ERROR(CheckEpsilon(epsilon));
  DPKIT_RETURN_IF_ERROR(CheckDelta(delta));
  if (epsilon == 0) {
    // delta(0; mu) = erf(mu / (2 sqrt 2)) (Bu et al. 2020, eq. 3.2 at eps = 0).
    return static_cast<double>(
        2.0L * kSqrt2 *
        boost::math::erf_inv(static_cast<long double>(delta), NoThrowPolicy()));
  }
  const long double log_target = std::log(static_cast<long double>(delta));
  // g is strictly increasing in mu (a larger mu is less private).
  auto g = [&](double mu) {
    return static_cast<double>(LogDeltaLongDouble(mu, epsilon) - log_target);
  };
  double lo = 1.0, hi = 1.0;
  double g_lo = g(lo), g_hi = g_lo;
  for (int step = 0; g_lo > 0; ++step) {
    if (step > 1000) return Error{"GdpMu: no mu found below 1e-300"};
    hi = lo;
    g_hi = g_lo;
    lo *= 0.5;
    g_lo = g(lo);
  }
  for (int step = 0; g_hi < 0; ++step) {
    if (step > 1000) return Error{"GdpMu: no mu found below 1e300"};
    lo = hi;
    g_lo = g_hi;
    hi *= 2.0;
    g_hi = g(hi);
  }
  if (g_lo == 0) return lo;
  if (g_hi == 0) return hi;
  std::uintmax_t iterations = kMaxRootIterations;
  std::pair<double, double> bracket = boost::math::tools::toms748_solve(
      g, lo, hi, g_lo, g_hi, boost::math::tools::eps_tolerance<double>(kToleranceBits),
      iterations, NoThrowPolicy());
  // The safe side is the smaller mu: delta(eps; first) <= delta.
  double mu = bracket.first;
  if (g(mu) > 0) mu = lo;
  return mu;
}

Result<double> AnalyticGaussianStddev(double epsilon, double delta, double l2_sensitivity) {
  if (!(std::isfinite(epsilon) && epsilon > 0)) {
    return Error{"epsilon must be finite and > 0, got " + internal::FormatDouble(epsilon)};
  }
  if (!(std::isfinite(l2_sensitivity) && l2_sensitivity > 0)) {
    return Error{"l2_sensitivity must be finite and > 0, got " +
                 internal::FormatDouble(l2_sensitivity)};
  }
  // Balle & Wang 2018, Thm. 8 == Bu et al. 2020, eq. (3.2) with mu = Delta/sigma.
  Result<double> mu = GdpMu(epsilon, delta);
  if (!mu.ok()) return mu;
  if (!(*mu > 0)) {
    return Error{"no Gaussian noise level reaches epsilon " + internal::FormatDouble(epsilon) +
                 " at delta " + internal::FormatDouble(delta)};
  }
  const double sigma = l2_sensitivity / *mu;
  if (!std::isfinite(sigma)) {
    return Error{"the Gaussian stddev overflows a double (l2_sensitivity too large)"};
  }
  return sigma;
}

Result<double> CltMu(double sampling_rate, double noise_multiplier, int64_t steps) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return RangeError("sampling_rate", "in (0, 1]", sampling_rate);
  }
  if (!(std::isfinite(noise_multiplier) && noise_multiplier > 0)) {
    return RangeError("noise_multiplier", "finite and > 0", noise_multiplier);
  }
  if (steps < 1) {
    return Error{"steps must be an integer >= 1, got " + std::to_string(steps)};
  }
  // Bu et al. 2020, eq. (3.1): mu = p sqrt(T (e^{1/sigma^2} - 1)), in log space:
  // log(e^x - 1) = x + log1p(-e^-x) for large x.
  const long double x = 1.0L / (static_cast<long double>(noise_multiplier) * noise_multiplier);
  const long double log_expm1 =
      x < 1.0L ? std::log(std::expm1(x)) : x + std::log1p(-std::exp(-x));
  const long double log_mu =
      std::log(static_cast<long double>(sampling_rate)) +
      0.5L * (std::log(static_cast<long double>(steps)) + log_expm1);
  if (log_mu > std::log(static_cast<long double>(std::numeric_limits<double>::max()))) {
    return Error{"noise_multiplier " + Num(noise_multiplier) +
                 " is too small: mu_CLT overflows (use noise_multiplier >= 0.04)"};
  }
  return static_cast<double>(std::exp(log_mu));
}

Result<double> CltNoiseMultiplier(double epsilon, double delta, double sampling_rate,
                                  int64_t steps) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return RangeError("sampling_rate", "in (0, 1]", sampling_rate);
  }
  if (steps < 1) {
    return Error{"steps must be an integer >= 1, got " + std::to_string(steps)};
  }
  Result<double> mu = GdpMu(epsilon, delta);
  if (!mu.ok()) return mu;
  if (!(*mu > 0)) return Error{"epsilon and delta give mu = 0: no noise level meets them"};
  // Bu et al. 2020, eqs. (3.3)-(3.4): invert eq. (3.1),
  // e^{1/sigma^2} = 1 + mu^2 / (p^2 T), in log space: r = log(mu^2 / (p^2 T)).
  const long double r = 2.0L * std::log(static_cast<long double>(*mu)) -
                        2.0L * std::log(static_cast<long double>(sampling_rate)) -
                        std::log(static_cast<long double>(steps));
  const long double log1p_exp_r =
      r > 40.0L ? r + std::log1p(std::exp(-r)) : std::log1p(std::exp(r));
  return static_cast<double>(1.0L / std::sqrt(log1p_exp_r));
}

}  // namespace dpkit::accounting
