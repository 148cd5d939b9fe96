#include "dpkit/accounting/rdp.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "dpkit/accounting/internal/format.h"

namespace dpkit::accounting {
namespace {

using internal::FormatDouble;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kSqrtPi = 1.7724538509055160273;
constexpr double kLogHalf = -0.69314718055994530942;

// log(exp(a) + exp(b)) without overflow.
double LogAdd(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInf || a == kInf) return a;
  return a + std::log1p(std::exp(b - a));
}

// log(exp(a) - exp(b)) for a >= b; -inf when a == b.
double LogSub(double a, double b) {
  if (b == kNegInf) return a;
  if (b >= a) return kNegInf;
  const double d = b - a;
  // log1p(-e^d) loses accuracy as d -> 0-; log(-expm1(d)) does not.
  return a + (d > -0.693 ? std::log(-std::expm1(d)) : std::log1p(-std::exp(d)));
}

// log(expm1(x)) for x > 0.
double LogExpm1(double x) { return x > 1 ? x + std::log1p(-std::exp(-x)) : std::log(std::expm1(x)); }

// log(erfc(x)) for all real x without underflow: std::erfc below 10, and above it the
// asymptotic expansion erfc(x) = exp(-x²)/(x√π) Σ_n (-1)^n (2n−1)!!/(2x²)^n
// (Abramowitz & Stegun 7.1.23), whose terms at x >= 10 fall below 1e-19 by n = 15.
double LogErfc(double x) {
  if (x < 10) return std::log(std::erfc(x));
  const double inv_two_x2 = 1 / (2 * x * x);
  double term = 1;
  double sum = 1;
  for (int n = 1; n <= 20; ++n) {
    term *= -(2 * n - 1) * inv_two_x2;
    sum += term;
  }
  return -x * x - std::log(x * kSqrtPi) + std::log(sum);
}

// log1p(x) − x without the cancellation of computing the two separately: the Taylor
// series −x²/2 + x³/3 − ... for |x| < 0.01 (30 terms leave an error below 1e-60 relative),
// the direct form otherwise.
double Log1pMinusX(double x) {
  if (std::fabs(x) >= 0.01) return std::log1p(x) - x;
  double power = x;  // x^n
  double sum = 0;
  for (int n = 2; n <= 30; ++n) {
    power *= x;
    sum += (n % 2 == 0 ? -power : power) / n;
  }
  return sum;
}

bool IsInteger(double x) { return std::floor(x) == x; }

Result<void> CheckOrder(double order) {
  if (!std::isfinite(order) || !(order > 1)) {
    return Error{"order must be finite and > 1, got " + FormatDouble(order)};
  }
  return OkResult();
}

// log(A_α) − log(1) computed from log(A_α − 1) (which the series below produce
// precisely even when A_α − 1 is 1e-24), divided by α − 1.
double RdpFromLogAMinusOne(double log_a_minus_one, double order) {
  return LogAdd(0.0, log_a_minus_one) / (order - 1);
}

// Mironov, Talwar, Zhang 2019, Sec. 3.2 (integer α):
//   A_α = Σ_{k=0}^{α} C(α,k) (1−q)^{α−k} q^k exp((k² − k)/(2σ²)).
// Since Σ_k C(α,k)(1−q)^{α−k} q^k = 1 and the k = 0, 1 exponents vanish,
//   A_α − 1 = Σ_{k=2}^{α} C(α,k) (1−q)^{α−k} q^k expm1((k² − k)/(2σ²)),
// a sum of positive terms, accumulated in log space.
double LogAMinusOneInteger(double q, double sigma, double order) {
  const int64_t alpha = static_cast<int64_t>(order);
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double two_sigma2 = 2 * sigma * sigma;
  double log_binom = std::log(static_cast<double>(alpha));  // log C(α, 1)
  double log_sum = kNegInf;
  for (int64_t k = 2; k <= alpha; ++k) {
    log_binom += std::log(static_cast<double>(alpha - k + 1)) - std::log(static_cast<double>(k));
    const double kd = static_cast<double>(k);
    const double log_term = log_binom + (order - kd) * log_1mq + kd * log_q +
                            LogExpm1((kd * kd - kd) / two_sigma2);
    log_sum = LogAdd(log_sum, log_term);
  }
  return log_sum;
}

// Mironov, Talwar, Zhang 2019, Sec. 3.3 (fractional α). With z0 = σ² log(1/q − 1) + 1/2
// the point where q·μ1 = (1−q)·μ0, A_α = A_α1 + A_α2 with
//   A_α1 = Σ_{i≥0} C(α,i) q^i (1−q)^{α−i} exp((i² − i)/(2σ²)) · ½ erfc((i − z0)/(√2σ)),
//   A_α2 = Σ_{i≥0} C(α,i) q^{α−i} (1−q)^i exp((j² − j)/(2σ²)) · ½ erfc((z0 − j)/(√2σ)),
// j = α − i. To keep A_α − 1 precise at tiny q, the i = 0, 1 terms of A_α1 are summed in
// closed form: they equal B − (1−q)^α P0 − αq(1−q)^{α−1} P1 with
//   B = (1−q)^{α−1}(1 + (α−1)q) <= 1,  P0 = ½ erfc(z0/(√2σ)),  P1 = ½ erfc((z0−1)/(√2σ)),
// and B − 1 is evaluated with expm1/log1p. C(α,i) > 0 for i <= ⌊α⌋ + 1, and alternates
// in sign after; the magnitudes m_i of the combined terms then decrease (as i^{−α−2}), so
// once m_N <= m_{N−1} the tail Σ_{i>=N} is bounded in magnitude by m_N (alternating
// series) and adding m_N keeps the result an upper bound.
Result<double> LogAMinusOneFractional(double q, double sigma, double order, int64_t max_terms) {
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double sigma2 = sigma * sigma;
  const double z0 = sigma2 * (log_1mq - log_q) + 0.5;
  const double scale = std::sqrt(2.0) * sigma;

  double log_pos = kNegInf;
  double log_neg = kNegInf;
  // The closed-form part of the i = 0, 1 terms of A_α1.
  // log B = (α−1) log(1−q) + log(1 + (α−1)q), as a sum of two negative terms.
  const double log_b = (order - 1) * Log1pMinusX(-q) + Log1pMinusX((order - 1) * q);
  log_neg = LogAdd(log_neg, std::log(-std::expm1(log_b)));  // 1 − B >= 0
  log_neg = LogAdd(log_neg, order * log_1mq + kLogHalf + LogErfc(z0 / scale));
  log_neg = LogAdd(log_neg, std::log(order) + log_q + (order - 1) * log_1mq + kLogHalf +
                                LogErfc((z0 - 1) / scale));

  const double first_alternating = std::floor(order) + 2;
  double log_binom = 0;  // log |C(α, i)|
  bool positive = true;  // sign of C(α, i)
  double previous_log_magnitude = kInf;
  for (int64_t i = 0; i < max_terms; ++i) {
    const double id = static_cast<double>(i);
    if (i > 0) {
      const double factor = order - id + 1;  // C(α,i) = C(α,i−1)·(α − i + 1)/i
      log_binom += std::log(std::fabs(factor)) - std::log(id);
      if (factor < 0) positive = !positive;
    }
    const double j = order - id;
    double log_magnitude = log_binom + j * log_q + id * log_1mq + (j * j - j) / (2 * sigma2) +
                           kLogHalf + LogErfc((z0 - j) / scale);
    if (i >= 2) {
      log_magnitude =
          LogAdd(log_magnitude, log_binom + id * log_q + j * log_1mq +
                                    (id * id - id) / (2 * sigma2) + kLogHalf +
                                    LogErfc((id - z0) / scale));
    }
    if (id >= first_alternating && log_magnitude <= previous_log_magnitude) {
      // Stop once the tail bound is below 1e-10 of the current A_α − 1 estimate.
      const double log_estimate = LogSub(log_pos, log_neg);
      if (log_estimate != kNegInf && log_magnitude <= log_estimate + std::log(1e-10)) {
        log_pos = LogAdd(log_pos, log_magnitude);  // the alternating-tail bound
        // Rounding allowance: a few ulps of the accumulated magnitudes.
        log_pos = LogAdd(log_pos, std::log(8 * DBL_EPSILON) + LogAdd(log_pos, log_neg));
        return LogSub(log_pos, log_neg);
      }
      // Huge σ: A_α − 1 ~ q² α (α − 1) / (2σ²) lies within a million ulps of the sums
      // (which are near q² α²), so the estimate is rounding noise and the rule above
      // would run to max_terms (issue 21: 2e6 terms per order, seconds per RDP curve at
      // σ = 1e8). Once the terms are below the rounding, fall back to joint convexity:
      // A_α(P, Q) = E_Q[(P/Q)^α] is an f-divergence (f(t) = t^α convex), jointly convex
      // in (P, Q) (Csiszár 1967; van Erven, Harremoës 2014, Sec. III), so for the mixture
      // P = (1−q) N(0, σ²) + q N(1, σ²) against Q = N(0, σ²)
      //   A_α − 1 <= q (e^{α(α−1)/(2σ²)} − 1)
      // (the Gaussian's A_α, Mironov 2017, Prop. 7). Rounded up by a few ulps.
      const double log_floor = std::log(DBL_EPSILON) + LogAdd(log_pos, log_neg);
      if (log_magnitude <= log_floor &&
          (log_estimate == kNegInf || log_estimate <= log_floor + std::log(1e6))) {
        const double x = order * (order - 1) / (2 * sigma2);
        return log_q + std::log(std::expm1(x)) + 16 * DBL_EPSILON;
      }
    }
    if (positive) {
      log_pos = LogAdd(log_pos, log_magnitude);
    } else {
      log_neg = LogAdd(log_neg, log_magnitude);
    }
    previous_log_magnitude = log_magnitude;
  }
  return Error{"the RDP series of the Poisson-subsampled Gaussian at order " +
               FormatDouble(order) + " (sampling_rate " + FormatDouble(q) +
               ", noise_multiplier " + FormatDouble(sigma) + ") did not converge within " +
               std::to_string(max_terms) + " terms"};
}

Error OrderTooLarge(double order) {
  return Error{"order must be <= " + FormatDouble(kMaxSampledRdpOrder) +
               " for a sampled event (the sums have one term per unit of order), got " +
               FormatDouble(order)};
}

// Largest RDP order ε(∞) (the pure-DP ε) of an event, +inf when not bounded.
double RdpAtInfinity(const Event& event) {
  switch (event.kind()) {
    case EventKind::kLaplace:
      return 1 / event.scale();  // Laplace with scale b is (1/b)-DP
    case EventKind::kPureDp:
    case EventKind::kBoundedRange:  // eps-BR implies eps-DP
      return event.epsilon();
    case EventKind::kPoissonSampled: {
      // Poisson sampling of an eps-DP mechanism is log(1 + q(e^eps - 1))-DP under
      // add/remove (Li, Qardaji, Su 2012, Thm. 1; Balle, Barthe, Gaboardi 2018, Thm. 8).
      const double inner = RdpAtInfinity(event.inner());
      if (inner == kInf) return kInf;
      return std::log1p(event.sampling_rate() * std::expm1(inner));
    }
    case EventKind::kSelfComposed:
      return static_cast<double>(event.count()) * RdpAtInfinity(event.inner());
    case EventKind::kComposed: {
      double sum = 0;
      for (const Event& child : event.children()) sum += RdpAtInfinity(child);
      return sum;
    }
    default:
      return kInf;
  }
}

// Wang, Balle, Kasiviswanathan 2019, Thm. 9: for integer α >= 2 and sampling ratio
// γ = m/n without replacement, with ε(·) the inner mechanism's RDP,
//   ε'(α) <= 1/(α−1) log(1 + γ² C(α,2) min{4(e^{ε(2)} − 1), e^{ε(2)} min{2, (e^{ε(∞)} − 1)²}}
//                         + Σ_{j=3}^{α} γ^j C(α,j) e^{(j−1)ε(j)} min{2, (e^{ε(∞)} − 1)^j}).
// Fractional α: the cumulant (α−1)ε'(α) is convex in α (WBK 2019, Cor. 10; van Erven &
// Harremoës 2014), and 0 at α = 1, so it is at most the linear interpolation of the
// bounds at ⌊α⌋ and ⌈α⌉.
Result<std::vector<double>> RdpSampledWithoutReplacement(const Event& event,
                                                         const std::vector<double>& orders,
                                                         int64_t max_terms) {
  const Event& inner = event.inner();
  Result<std::vector<double>> inner_at_orders = ComputeRdpWithTermLimit(inner, orders, max_terms);
  if (!inner_at_orders.ok()) return inner_at_orders;
  if (event.sample_size() == event.population()) return inner_at_orders;  // no sampling

  double max_order = 2;
  for (double order : orders) {
    if (order > kMaxSampledRdpOrder) return OrderTooLarge(order);
    max_order = std::max(max_order, std::ceil(order));
  }
  std::vector<double> integer_orders;
  for (double a = 2; a <= max_order; ++a) integer_orders.push_back(a);
  Result<std::vector<double>> inner_rdp = ComputeRdpWithTermLimit(inner, integer_orders, max_terms);
  if (!inner_rdp.ok()) return inner_rdp;
  const auto eps = [&](int64_t j) { return (*inner_rdp)[static_cast<size_t>(j - 2)]; };
  const double eps_inf = RdpAtInfinity(inner);
  // log min{2, (e^{ε(∞)} − 1)^j}
  const double log_expm1_inf = eps_inf == kInf ? kInf : (eps_inf == 0 ? kNegInf : LogExpm1(eps_inf));
  const auto log_min_two = [&](double j) { return std::min(std::log(2.0), j * log_expm1_inf); };
  const double log_gamma = std::log(static_cast<double>(event.sample_size())) -
                           std::log(static_cast<double>(event.population()));

  // Upper bound on the cumulant (α−1)ε'(α) at integer α >= 1, memoised.
  std::map<int64_t, double> cumulant_cache;
  const auto cumulant = [&](int64_t alpha) -> double {
    if (alpha == 1) return 0.0;
    const auto cached = cumulant_cache.find(alpha);
    if (cached != cumulant_cache.end()) return cached->second;
    const double a = static_cast<double>(alpha);
    double log_binom = std::log(a) + std::log(a - 1) - std::log(2.0);  // log C(α, 2)
    double log_j2 = std::log(4.0) + (eps(2) == kInf ? kInf : LogExpm1(std::max(eps(2), 1e-300)));
    log_j2 = std::min(log_j2, eps(2) + log_min_two(2));
    double log_sum = 2 * log_gamma + log_binom + log_j2;
    for (int64_t j = 3; j <= alpha; ++j) {
      const double jd = static_cast<double>(j);
      log_binom += std::log(a - jd + 1) - std::log(jd);
      log_sum = LogAdd(log_sum, jd * log_gamma + log_binom + (jd - 1) * eps(j) + log_min_two(jd));
    }
    double bound = LogAdd(0.0, log_sum);
    // The subsampled mechanism is never worse than the mechanism itself.
    const double unsampled = (a - 1) * eps(alpha);
    bound = std::isnan(bound) ? unsampled : std::min(bound, unsampled);
    cumulant_cache[alpha] = bound;
    return bound;
  };

  std::vector<double> out(orders.size());
  for (size_t o = 0; o < orders.size(); ++o) {
    const double order = orders[o];
    const double lower = std::floor(order);
    double bound;
    if (lower == order) {
      bound = cumulant(static_cast<int64_t>(order)) / (order - 1);
    } else {
      const double t = order - lower;
      const double low = cumulant(static_cast<int64_t>(lower));
      const double high = cumulant(static_cast<int64_t>(lower) + 1);
      bound = ((1 - t) * low + t * high) / (order - 1);
      if (std::isnan(bound)) bound = kInf;  // 0·inf cannot occur (t in (0,1)); defensive
    }
    out[o] = std::min(bound, (*inner_at_orders)[o]);
  }
  return out;
}

// Poisson sampling with rate q < 1 of an inner event that is not a plain Gaussian:
// the general bound of Zhu & Wang 2019 (RdpPoissonSubsampledUpperBound) at integer
// orders, the cumulant interpolated at fractional ones (as in RdpSampledWithoutReplacement:
// (α−1)ε'(α) is convex in α and 0 at α = 1), and capped by the inner RDP (Poisson
// sampling never hurts: (α−1)ε(α) is jointly convex in the pair of distributions) and by
// the RDP of the amplified pure-DP ε when the inner event is pure DP.
Result<std::vector<double>> RdpPoissonSampledGeneral(const Event& event,
                                                     const std::vector<double>& orders,
                                                     int64_t max_terms) {
  const Event& inner = event.inner();
  const double q = event.sampling_rate();
  Result<std::vector<double>> inner_at_orders = ComputeRdpWithTermLimit(inner, orders, max_terms);
  if (!inner_at_orders.ok()) return inner_at_orders;
  double max_order = 2;
  for (double order : orders) {
    if (order > kMaxSampledRdpOrder) return OrderTooLarge(order);
    max_order = std::max(max_order, std::ceil(order));
  }
  std::vector<double> integer_orders;
  for (double a = 2; a <= max_order; ++a) integer_orders.push_back(a);
  Result<std::vector<double>> inner_integer =
      ComputeRdpWithTermLimit(inner, integer_orders, max_terms);
  if (!inner_integer.ok()) return inner_integer;
  std::vector<double> inner_rdp(2, 0.0);  // entries 0 and 1 are unused
  inner_rdp.insert(inner_rdp.end(), inner_integer->begin(), inner_integer->end());
  const double eps_inf = RdpAtInfinity(event);  // amplified pure-DP ε (+inf if none)

  std::map<int64_t, double> cumulant_cache;  // (α−1)ε'(α) at integer α
  const auto cumulant = [&](int64_t alpha) -> double {
    if (alpha == 1) return 0.0;
    const auto cached = cumulant_cache.find(alpha);
    if (cached != cumulant_cache.end()) return cached->second;
    const double a = static_cast<double>(alpha);
    Result<double> general = RdpPoissonSubsampledUpperBound(q, inner_rdp, alpha);
    double bound = general.ok() ? *general : kInf;  // only a NaN inner value can fail
    if (eps_inf < kInf) bound = std::min(bound, RdpPureDp(eps_inf, a).value());
    cumulant_cache[alpha] = (a - 1) * bound;
    return cumulant_cache[alpha];
  };
  std::vector<double> out(orders.size());
  for (size_t o = 0; o < orders.size(); ++o) {
    const double order = orders[o];
    const double lower = std::floor(order);
    double bound;
    if (lower == order) {
      bound = cumulant(static_cast<int64_t>(order)) / (order - 1);
    } else {
      const double t = order - lower;
      bound = ((1 - t) * cumulant(static_cast<int64_t>(lower)) +
               t * cumulant(static_cast<int64_t>(lower) + 1)) /
              (order - 1);
      if (eps_inf < kInf) bound = std::min(bound, RdpPureDp(eps_inf, order).value());
    }
    out[o] = std::min(bound, (*inner_at_orders)[o]);
  }
  return out;
}

}  // namespace

std::vector<double> DefaultRdpOrders() {
  std::vector<double> orders = {1.01, 1.02, 1.03, 1.05, 1.075, 1.1,  1.15, 1.2,  1.25,
                                1.3,  1.35, 1.4,  1.5,  1.6,   1.7,  1.8,  1.9};
  for (double a = 2; a < 6; a += 0.25) orders.push_back(a);
  for (double a = 6; a <= 64; ++a) orders.push_back(a);
  for (double a : {72.0, 80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 256.0, 320.0, 384.0, 512.0,
                   768.0, 1024.0, 1536.0, 2048.0, 3072.0, 4096.0, 6144.0, 8192.0, 10000.0,
                   16384.0, 20000.0}) {
    orders.push_back(a);
  }
  return orders;
}

std::vector<double> TfPrivacyOrders() {
  std::vector<double> orders;
  for (int x = 1; x <= 99; ++x) orders.push_back(1 + x / 10.0);
  for (int a = 12; a < 64; ++a) orders.push_back(a);
  return orders;
}

Result<double> RdpPoissonSubsampledGaussianWithTermLimit(double sampling_rate,
                                                         double noise_multiplier,
                                                         double order, int64_t max_terms) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return Error{"sampling_rate must be in (0, 1], got " + FormatDouble(sampling_rate)};
  }
  if (!std::isfinite(noise_multiplier) || !(noise_multiplier > 0)) {
    return Error{"noise_multiplier must be finite and > 0, got " + FormatDouble(noise_multiplier)};
  }
  DPKIT_RETURN_IF_ERROR(CheckOrder(order));
  if (!(max_terms >= 1)) {
    return Error{"max_terms must be >= 1, got " + std::to_string(max_terms)};
  }
  // q = 1: the Gaussian mechanism, α/(2σ²) (Mironov 2017, Prop. 7).
  if (sampling_rate == 1) return order / (2 * noise_multiplier * noise_multiplier);
  if (order > kMaxSampledRdpOrder) return OrderTooLarge(order);
  if (IsInteger(order)) {
    return RdpFromLogAMinusOne(LogAMinusOneInteger(sampling_rate, noise_multiplier, order), order);
  }
  Result<double> log_a_minus_one =
      LogAMinusOneFractional(sampling_rate, noise_multiplier, order, max_terms);
  if (!log_a_minus_one.ok()) return log_a_minus_one;
  return RdpFromLogAMinusOne(*log_a_minus_one, order);
}

Result<double> RdpPoissonSubsampledGaussian(double sampling_rate, double noise_multiplier,
                                            double order) {
  return RdpPoissonSubsampledGaussianWithTermLimit(sampling_rate, noise_multiplier, order,
                                                   kDefaultRdpSeriesTermLimit);
}

// Mironov 2017, Prop. 6 (Table 2), sensitivity 1:
//   ε(α) = 1/(α−1) log(α/(2α−1) e^{(α−1)/b} + (α−1)/(2α−1) e^{−α/b}).
Result<double> RdpLaplace(double scale, double order) {
  if (!std::isfinite(scale) || !(scale > 0)) {
    return Error{"scale must be finite and > 0, got " + FormatDouble(scale)};
  }
  DPKIT_RETURN_IF_ERROR(CheckOrder(order));
  const double log_denominator = std::log(2 * order - 1);
  const double log_a = LogAdd(std::log(order) - log_denominator + (order - 1) / scale,
                              std::log(order - 1) - log_denominator - order / scale);
  return std::max(0.0, log_a / (order - 1));
}

// Randomized response with p = e^ε/(1+e^ε) (Mironov 2017, Table 2):
//   ε(α) = 1/(α−1) log((e^{αε} + e^{(1−α)ε})/(1 + e^ε)).
// Written as log1p(N/(1+e^ε)) with N = e^{αε} + e^{(1−α)ε} − 1 − e^ε
//   = expm1((α−1)ε) · expm1(αε) · e^{−(α−1)ε}, which has no cancellation at small ε.
Result<double> RdpPureDp(double epsilon, double order) {
  if (!std::isfinite(epsilon) || !(epsilon >= 0)) {
    return Error{"epsilon must be finite and >= 0, got " + FormatDouble(epsilon)};
  }
  DPKIT_RETURN_IF_ERROR(CheckOrder(order));
  if (epsilon == 0) return 0.0;
  const double x = (order - 1) * epsilon;
  const double log_n = LogExpm1(x) + LogExpm1(order * epsilon) - x;
  const double log_ratio = log_n - LogAdd(0.0, epsilon);
  const double rdp = LogAdd(0.0, log_ratio) / (order - 1);
  return std::min(rdp, epsilon);  // ε(α) <= ε(∞) = ε; guards rounding at huge α
}

// Exact worst case over ε-bounded-range pairs (P, Q). With X = P/Q = e^L, BR means
// X ∈ [u, u e^ε] for some u, and E_Q[X] = 1 forces u ∈ [e^{−ε}, 1]. E_Q[X^α] is convex
// in X, so for fixed u its maximum over such laws is attained by the two-point law on
// {u, u e^ε} with mean 1 (the two-point reduction behind the BR bounds of Cesar &
// Rogers 2021, "Bounding, Concentrating, and Truncating", and Dong, Durfee, Rogers 2020;
// derived here in full):
//   E_Q[X^α] = f(u) = u^{α−1} (A − B u)/(e^ε − 1),  A = e^{αε} − 1,  B = e^{αε} − e^ε.
// log f is concave in u with f(e^{−ε}) = f(1) = 1; f' = 0 at u* = (α−1)A/(αB), where
// A − B u* = A/α. Hence the exact worst-case RDP is
//   ε(α) = [(α−1) log u* + log(A/(α(e^ε − 1)))]/(α − 1),
// attained by a two-output mechanism. log u* = log1p(((α−1) r − 1)/α) with
// r = (e^ε − 1)/B = A/B − 1. A few-ulp rounding allowance is added, and the result is
// capped by αε²/8 (Cesar & Rogers 2021: ε-BR implies (ε²/8)-zCDP) and by ε.
Result<double> RdpBoundedRange(double epsilon, double order) {
  if (!std::isfinite(epsilon) || !(epsilon >= 0)) {
    return Error{"epsilon must be finite and >= 0, got " + FormatDouble(epsilon)};
  }
  DPKIT_RETURN_IF_ERROR(CheckOrder(order));
  if (epsilon == 0) return 0.0;
  const double a = order;
  const double alpha_eps = a * epsilon;
  const double rest_eps = (a - 1) * epsilon;
  // r = expm1(ε) / (e^ε expm1((α−1)ε)), directly while that cannot overflow.
  const double r = rest_eps < 700
                       ? std::expm1(epsilon) / (std::exp(epsilon) * std::expm1(rest_eps))
                       : std::exp(LogExpm1(epsilon) - epsilon - LogExpm1(rest_eps));
  const double log_u = std::log1p(((a - 1) * r - 1) / a);
  // log(A/(α(e^ε − 1))), a ratio near 1 at small ε: computed as a ratio where possible.
  double log_second, second_scale;  // and the magnitude of the terms it is made of
  if (alpha_eps < 700) {
    log_second = std::log(std::expm1(alpha_eps) / (a * std::expm1(epsilon)));
    second_scale = 1 + std::fabs(log_second);
  } else {
    const double log_a = LogExpm1(alpha_eps), log_c = LogExpm1(epsilon);
    log_second = log_a - std::log(a) - log_c;
    second_scale = std::fabs(log_a) + std::log(a) + std::fabs(log_c);
  }
  const double cumulant = (a - 1) * log_u + log_second;
  // Rounding: r and (α−1)r carry a few ulps, so x = ((α−1)r − 1)/α is off by a few ulps
  // of 1/α, and log1p(x) by that over u* >= min(1/2, ~1/ε); (α−1) log_u therefore by a
  // few ulps of max(2, ε) plus those of its own size. 64 ulps of each scale cover this.
  const double allowance = 64 * DBL_EPSILON *
                           (std::max(2.0, epsilon) + (a - 1) * std::fabs(log_u) + second_scale);
  const double exact = std::max(0.0, (cumulant + allowance) / (a - 1));
  return std::min({exact, a * epsilon * epsilon / 8, epsilon});
}

// Zhu & Wang 2019, "Poisson subsampled Rényi differential privacy", Thm. 6 (integer α):
//   (α−1) ε'(α) <= log[ (1−q)^{α−1}(αq − q + 1) + C(α,2) q² (1−q)^{α−2} e^{ε(2)}
//                       + 3 Σ_{l=3}^{α} C(α,l) q^l (1−q)^{α−l} e^{(l−1)ε(l)} ],
// summed in log space; then capped by ε(α) itself (Poisson sampling never hurts).
Result<double> RdpPoissonSubsampledUpperBound(double sampling_rate,
                                              const std::vector<double>& inner_rdp,
                                              int64_t order) {
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return Error{"sampling_rate must be in (0, 1], got " + FormatDouble(sampling_rate)};
  }
  if (order < 2 || static_cast<double>(order) > kMaxSampledRdpOrder) {
    return Error{"order must be an integer in [2, " + FormatDouble(kMaxSampledRdpOrder) +
                 "], got " + std::to_string(order)};
  }
  if (inner_rdp.size() < static_cast<size_t>(order) + 1) {
    return Error{"inner_rdp must have entries up to index order=" + std::to_string(order) +
                 ", got size " + std::to_string(inner_rdp.size())};
  }
  for (int64_t l = 2; l <= order; ++l) {
    if (!(inner_rdp[l] >= 0)) {
      return Error{"inner_rdp values must be >= 0 (+inf allowed), got " +
                   FormatDouble(inner_rdp[l]) + " at order " + std::to_string(l)};
    }
  }
  const double inner = inner_rdp[order];
  if (sampling_rate == 1) return inner;
  // The l = 0, 1 binomial terms make up the first summand, so with Σ_l C(α,l) q^l
  // (1−q)^{α−l} = 1 the sum minus one is
  //   Σ_{l>=2} C(α,l) q^l (1−q)^{α−l} (c_l e^{(l−1)ε(l)} − 1),  c_2 = 1, c_l = 3 (l >= 3),
  // a sum of non-negative terms: accumulated in log space it keeps full relative
  // precision at tiny q (as LogAMinusOneInteger does for the Gaussian).
  const double q = sampling_rate;
  const double a = static_cast<double>(order);
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  double log_binom = std::log(a) + std::log(a - 1) - std::log(2.0);  // log C(α, 2)
  double log_sum = log_binom + 2 * log_q + (a - 2) * log_1mq + LogExpm1(inner_rdp[2]);
  for (int64_t l = 3; l <= order; ++l) {
    const double lj = static_cast<double>(l);
    log_binom += std::log(a - lj + 1) - std::log(lj);
    const double x = (lj - 1) * inner_rdp[l];  // log(3 e^x − 1) = x + log(3 − e^{−x})
    log_sum = LogAdd(log_sum, log_binom + lj * log_q + (a - lj) * log_1mq + x +
                                  std::log(3 - std::exp(-x)));
  }
  return std::min(LogAdd(0.0, log_sum) / (a - 1), inner);
}

Result<std::vector<double>> ComputeRdp(const Event& event, const std::vector<double>& orders) {
  return ComputeRdpWithTermLimit(event, orders, kDefaultRdpSeriesTermLimit);
}

Result<std::vector<double>> ComputeRdpWithTermLimit(const Event& event,
                                                    const std::vector<double>& orders,
                                                    int64_t max_terms) {
  for (double order : orders) DPKIT_RETURN_IF_ERROR(CheckOrder(order));
  std::vector<double> out(orders.size(), 0.0);
  switch (event.kind()) {
    case EventKind::kGaussian:
      for (size_t i = 0; i < orders.size(); ++i) {
        // Mironov 2017, Prop. 7: α/(2σ²) at sensitivity 1.
        out[i] = orders[i] / (2 * event.noise_multiplier() * event.noise_multiplier());
      }
      return out;
    case EventKind::kDiscreteGaussian: {
      // Canonne, Kamath, Steinke 2020, Thm. 4 and Prop. 5: N_Z(0, s^2) added to an
      // integer query of L2 sensitivity D is (D^2/(2 s^2))-zCDP, i.e. the Rényi
      // divergence of every order α > 1, in both orders of the neighbouring pair, is at
      // most α D^2/(2 s^2). (Why: sum_x p(x)^α p(x-D)^{1-α} = e^{α(α-1)D^2/(2s^2)}
      // sum_x e^{-(x-(1-α)D)^2/(2s^2)} / Z, and the shifted theta sum is <= Z by Poisson
      // summation, with equality at integer α.) Poisson sampling of this event goes
      // through the general bound (RdpPoissonSampledGeneral), not the continuous
      // subsampled-Gaussian series, which is proven only for the continuous Gaussian.
      const double ratio = static_cast<double>(event.sensitivity()) / event.sigma();
      for (size_t i = 0; i < orders.size(); ++i) out[i] = orders[i] * ratio * ratio / 2;
      return out;
    }
    case EventKind::kLaplace:
      for (size_t i = 0; i < orders.size(); ++i) {
        Result<double> r = RdpLaplace(event.scale(), orders[i]);
        if (!r.ok()) return Error{r.error()};
        out[i] = *r;
      }
      return out;
    case EventKind::kPureDp:
      for (size_t i = 0; i < orders.size(); ++i) {
        Result<double> r = RdpPureDp(event.epsilon(), orders[i]);
        if (!r.ok()) return Error{r.error()};
        out[i] = *r;
      }
      return out;
    case EventKind::kBoundedRange:
      for (size_t i = 0; i < orders.size(); ++i) {
        Result<double> r = RdpBoundedRange(event.epsilon(), orders[i]);
        if (!r.ok()) return Error{r.error()};
        out[i] = *r;
      }
      return out;
    case EventKind::kApproxDp:
      return Error{"an approx_dp event has no RDP bound; use an (epsilon, delta) composition "
                   "theorem or a PLD accountant"};
    case EventKind::kPoissonSampled: {
      if (event.sampling_rate() == 1) {
        return ComputeRdpWithTermLimit(event.inner(), orders, max_terms);
      }
      if (event.inner().kind() != EventKind::kGaussian) {
        return RdpPoissonSampledGeneral(event, orders, max_terms);
      }
      for (size_t i = 0; i < orders.size(); ++i) {
        if (orders[i] > kMaxSampledRdpOrder) return OrderTooLarge(orders[i]);
        Result<double> r = RdpPoissonSubsampledGaussianWithTermLimit(
            event.sampling_rate(), event.inner().noise_multiplier(), orders[i], max_terms);
        // Only a non-converged fractional series can fail here (inputs are validated):
        // +inf is the honest upper bound for that order (see the header).
        out[i] = r.ok() ? *r : kInf;
      }
      return out;
    }
    case EventKind::kSampledWithoutReplacement:
      return RdpSampledWithoutReplacement(event, orders, max_terms);
    case EventKind::kSelfComposed: {
      Result<std::vector<double>> inner = ComputeRdpWithTermLimit(event.inner(), orders, max_terms);
      if (!inner.ok()) return inner;
      // Mironov 2017, Prop. 1 (composition), applied count times.
      for (size_t i = 0; i < orders.size(); ++i) {
        out[i] = (*inner)[i] == 0 ? 0.0 : static_cast<double>(event.count()) * (*inner)[i];
      }
      return out;
    }
    case EventKind::kComposed: {
      // A ledger lists one event per step: a run of equal children is computed once.
      const Event* previous = nullptr;
      Result<std::vector<double>> child_rdp = std::vector<double>();
      for (const Event& child : event.children()) {
        if (previous == nullptr || !(child == *previous)) {
          child_rdp = ComputeRdpWithTermLimit(child, orders, max_terms);
          if (!child_rdp.ok()) return child_rdp;
          previous = &child;
        }
        for (size_t i = 0; i < orders.size(); ++i) out[i] += (*child_rdp)[i];
      }
      return out;
    }
  }
  return Error{"unknown event kind"};
}

const char* RdpConversionName(RdpConversion conversion) {
  return conversion == RdpConversion::kClassic ? "classic" : "improved";
}

namespace {

Result<void> CheckCurve(const std::vector<double>& orders, const std::vector<double>& rdp) {
  if (orders.empty()) return Error{"orders must be non-empty"};
  if (orders.size() != rdp.size()) {
    return Error{"orders and rdp must have the same length, got " +
                 std::to_string(orders.size()) + " and " + std::to_string(rdp.size())};
  }
  for (size_t i = 0; i < orders.size(); ++i) {
    DPKIT_RETURN_IF_ERROR(CheckOrder(orders[i]));
    if (!(rdp[i] >= 0)) {
      return Error{"rdp values must be >= 0 (+inf allowed), got " + FormatDouble(rdp[i]) +
                   " at order " + FormatDouble(orders[i])};
    }
  }
  return OkResult();
}

}  // namespace

Result<RdpEpsilon> RdpToEpsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                                double delta, RdpConversion conversion) {
  DPKIT_RETURN_IF_ERROR(CheckCurve(orders, rdp));
  if (!(delta > 0 && delta < 1)) {
    return Error{"delta must be in (0, 1), got " + FormatDouble(delta)};
  }
  const double log_delta = std::log(delta);
  RdpEpsilon best{kInf, orders.front()};
  for (size_t i = 0; i < orders.size(); ++i) {
    if (rdp[i] == kInf) continue;
    const double a = orders[i];
    double eps;
    if (conversion == RdpConversion::kClassic) {
      eps = rdp[i] - log_delta / (a - 1);  // Mironov 2017, Prop. 3
    } else {
      // Balle et al. 2020, Thm. 21 (= Canonne, Kamath, Steinke 2020, Prop. 12;
      // Asoodeh et al. 2020, eq. 20).
      eps = rdp[i] + std::log1p(-1 / a) - (log_delta + std::log(a)) / (a - 1);
    }
    eps = std::max(eps, 0.0);  // (ε, δ)-DP with ε < 0 implies (0, δ)-DP
    if (eps < best.epsilon) best = RdpEpsilon{eps, a};
  }
  return best;
}

Result<RdpDelta> RdpToDelta(const std::vector<double>& orders, const std::vector<double>& rdp,
                            double epsilon, RdpConversion conversion) {
  DPKIT_RETURN_IF_ERROR(CheckCurve(orders, rdp));
  if (!std::isfinite(epsilon) || !(epsilon >= 0)) {
    return Error{"epsilon must be finite and >= 0, got " + FormatDouble(epsilon)};
  }
  RdpDelta best{1.0, orders.front()};
  double best_log = 0;  // log δ; δ = 1 always holds
  for (size_t i = 0; i < orders.size(); ++i) {
    if (rdp[i] == kInf) continue;
    const double a = orders[i];
    double log_delta = (a - 1) * (rdp[i] - epsilon);  // Mironov 2017, Prop. 3
    if (conversion == RdpConversion::kImproved) {
      // Canonne, Kamath, Steinke 2020, Prop. 12.
      log_delta += a * std::log1p(-1 / a) - std::log(a - 1);
    }
    if (log_delta < best_log) {
      best_log = log_delta;
      best = RdpDelta{std::exp(log_delta), a};
    }
  }
  return best;
}

}  // namespace dpkit::accounting
