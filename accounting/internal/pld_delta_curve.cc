#include "accounting/internal/pld_delta_curve.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "accounting/internal/pld_search.h"

namespace dpkit::accounting::pld_internal {

DeltaCurve MakeCurve(const Composed& c, Bound bound) {
  const bool upper = bound == Bound::kUpper;
  DeltaCurve d;
  d.bound = bound;
  d.h = c.h;
  d.start = c.window_start;
  d.n = c.n;
  d.infinity_mass = c.infinity_mass;
  d.log_scale = c.log_scale;
  d.lambda = c.lambda;
  d.tau = c.tilted_outside;
  d.above = c.n > 0 ? std::exp(c.log_above_bound) : 0;
  d.s1.assign(c.n + 1, 0);
  d.s2.assign(c.n + 1, 0);
  // w_j = v_j exp(log_scale - lambda l_j), w2_j = w_j e^{-l_j}, l_j = (start + j) h.
  // The scale factors are kept in double where their exponent is within +-700 and
  // computed in long double otherwise (then only a few entries far in the tails).
  const double r1 = std::exp(-static_cast<double>(c.lambda * c.h));
  const double r2 = std::exp(-static_cast<double>((c.lambda + 1) * c.h));
  double f1 = 0, f2 = 0;
  bool in_range = false;
  ld s1 = 0, s2 = 0;
  for (int64_t j = c.n - 1; j >= 0; --j) {
    const ld l = static_cast<ld>(c.window_start + j) * c.h;
    const ld v = upper ? static_cast<ld>(c.tilted[j]) + c.entry_error
                       : static_cast<ld>(c.tilted[j]) - c.entry_error;
    // Walking downwards in j the exponents grow by lambda h: f_{j-1} = f_j / r.
    if ((c.n - 1 - j) % kAnchor == 0) {
      const ld e1 = c.log_scale - c.lambda * l;
      // Within the next kAnchor entries the exponents grow by at most kAnchor (lambda+1) h.
      const ld drift = kAnchor * (c.lambda + 1) * c.h;
      in_range = std::fabs(e1) + drift < 700 && std::fabs(e1 - l) + drift < 700;
      if (in_range) {
        f1 = std::exp(static_cast<double>(e1));
        f2 = std::exp(static_cast<double>(e1 - l));
      }
    } else if (in_range) {
      f1 /= r1;
      f2 /= r2;
    }
    if (v > 0) {
      if (in_range) {
        s1 += v * f1;
        s2 += v * f2;
      } else {
        const ld lw = std::log(v) + c.log_scale - c.lambda * l;
        s1 += std::exp(lw);
        s2 += std::exp(lw - l);
      }
    }
    d.s1[j] = s1;
    d.s2[j] = s2;
  }
  return d;
}

ld DeltaAt(const DeltaCurve& c, ld eps) {
  ld sum = 0;
  if (c.n > 0) {
    // First entry with loss > eps.
    int64_t first = static_cast<int64_t>(std::floor(eps / c.h)) + 1 - c.start;
    while (first > 0 && static_cast<ld>(c.start + first - 1) * c.h > eps) --first;
    while (first < c.n && static_cast<ld>(c.start + first) * c.h <= eps) ++first;
    first = std::min<int64_t>(std::max<int64_t>(first, 0), c.n);
    // e^eps s2 = sum_{l_j > eps} w_j e^{eps - l_j} <= s1: computed as exp(eps + log s2),
    // because e^eps alone overflows a long double for eps > ~11356 (and 0 * inf is NaN).
    const ld x_s2 = c.s2[first] > 0 ? std::exp(eps + std::log(c.s2[first])) : 0;
    // e^eps s2 <= s1, so both are finite unless the untilted weights themselves overflowed
    // a long double: with a huge tilt (lambda ~ 1e4 for epsilon ~ 1e4, e.g. sigma = 0.005)
    // the error allowance of an entry, entry_error e^{K - lambda l}, can exceed 1e4932.
    // Then only the trivial bounds are certain: delta <= 1 and delta >= 0.
    if (!std::isfinite(c.s1[first]) || !std::isfinite(x_s2)) {
      return c.bound == Bound::kUpper ? 1 : 0;
    }
    sum = c.s1[first] - x_s2;
    // Rounding of the weights (kCurveUlps each) and of this difference: the error is
    // relative to the two terms, not to their (possibly much smaller) difference.
    const ld rounding = (kCurveUlps * kUnit + 8 * kLdUnit) * (c.s1[first] + x_s2);
    if (c.bound == Bound::kUpper) {
      sum = std::max<ld>(sum + rounding, 0) + c.above;
    } else {
      const ld first_loss = static_cast<ld>(c.start + first) * c.h;
      sum -= rounding;
      // (tau = 0 is skipped: its factor may be +inf, and 0 * inf is NaN.)
      if (c.tau > 0) sum -= c.tau * std::exp(c.log_scale - c.lambda * std::max(first_loss, eps));
      sum = std::max<ld>(sum, 0);
    }
  }
  const ld total = c.infinity_mass + sum;
  return c.bound == Bound::kUpper ? std::min<ld>(total * (1 + 4 * kUnit), 1)
                 : std::min<ld>(total * (1 - 4 * kUnit), 1);
}

ld EpsilonFor(const DeltaCurve& c, ld delta, ld start_hint) {
  if (c.bound == Bound::kUpper) {
    if (DeltaAt(c, 0) <= delta) return 0;
    const ld hi = std::max<ld>(1, c.n > 0 ? static_cast<ld>(c.start + c.n) * c.h : 1);
    if (DeltaAt(c, hi) > delta) return std::numeric_limits<ld>::infinity();
    return Bisect<ld>(
               0, hi, [&](ld mid) { return DeltaAt(c, mid) <= delta; },
               [](ld lo, ld hi) { return !(hi - lo > 1e-13L * std::max<ld>(1, hi)); }, 200)
        .hi;
  }
  if (c.infinity_mass > delta) return std::numeric_limits<ld>::infinity();
  // Grid points eps_j = (start + j) h; on [eps_j, eps_{j+1}) the curve is monotone.
  int64_t top = c.n - 1;
  if (std::isfinite(start_hint)) {
    top = std::min<int64_t>(top, static_cast<int64_t>(std::ceil(start_hint / c.h)) + 1 - c.start);
  }
  for (int64_t j = top; j >= 0; --j) {
    const ld a = static_cast<ld>(c.start + j) * c.h;
    if (a < 0) break;
    if (DeltaAt(c, a) > delta) {
      return Bisect<ld>(
                 a, a + c.h, [&](ld mid) { return !(DeltaAt(c, mid) > delta); },
                 [](ld, ld) { return false; }, 64)
          .lo;
    }
  }
  return 0;
}

ld CurveAnswer(const DeltaCurve& c, const Query& query, ld hint) {
  return query.at_epsilon() ? DeltaAt(c, query.value) : EpsilonFor(c, query.value, hint);
}

}  // namespace dpkit::accounting::pld_internal
