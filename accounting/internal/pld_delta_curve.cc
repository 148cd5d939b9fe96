#include "dpkit/accounting/internal/pld_delta_curve.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "dpkit/accounting/internal/pld_search.h"

namespace dpkit::accounting::pld_internal {

// (8) Offsets of the second suffix sum. The curve needs e^eps sum_{l_j > eps} w_j e^{-l_j}
//     (DeltaAt). Stored as the plain sum s2 = sum w_j e^{-l_j}, its terms leave the range of
//     long double (e^{-11399} is the smallest subnormal) once l_j exceeds ~11400 (the
//     composed loss of sigma = 1, T = 2.5e4 already does): they round to 0, which lowers
//     e^eps s2 and RAISES s1 - e^eps s2, so the optimistic curve exceeds the true one (sigma
//     = 1, T = 1e5, delta = 1e-5: "lower bound" 51348.59 > exact 51347.68, Balle, Wang 2018,
//     Thm. 8; under Emscripten, whose exp is double's, from l_j ~ 745 on).
//     So s2 is stored relative to an offset o_j = g_j h (g_j an integer grid index):
//       S_j = e^{o_j} s2_j = sum_{k >= j} w_k e^{o_j - l_k},
//       e^eps s2_j = exp((eps - o_j) + log S_j).
//     Walking down from the top, g starts at 0 and is moved to g' = start + j (o' = l_j,
//     S <- S e^{(g' - g) h}) whenever |l_j - o| > kOffsetLoss. Every entry then has
//     |l_j - o_j| <= kOffsetLoss, so its term w_j e^{o_j - l_j} <= w_j e^{kOffsetLoss} and
//     e^{eps - o_j} <= e^{kOffsetLoss} (eps < l_first) stay in range, and a window inside
//     |l| <= kOffsetLoss keeps o = 0: the arithmetic of the plain sum, bit for bit.
//     Only roundings are to be bounded. Beyond those the plain sum allows for (kCurveUlps
//     and 8u of both terms), with u = kLdUnit:
//      - a rebasing multiplies the carried S by exp((g' - g) h), (g - g') h <= kOffsetLoss +
//        h (the entry above was within it): the integer difference is exact, the product with
//        h and exp's argument round by (kOffsetLoss + 1) u, exp and the product by a few u:
//        the terms carried through m rebasings are off by a relative m (kOffsetLoss + 8) 2u
//        at most, m <= `rebases` (rebasings of a zero S round nothing and are not counted);
//      - a term's exponent log(v) + log_scale - lambda l_j - (l_j - o_j) rounds by at most
//        (|log v| + |log_scale| + |lambda l_j| + kOffsetLoss) u, |log v| < 12000 (v is a
//        normal long double; in double, < 745);
//      - (eps - o) + log S, then exp: (|o| + |eps| + 2 |log S| + 8) u;
//      so a relative 2u (rebases (kOffsetLoss + 8) + |o| + |eps| + 2 |log S| +
//      exponent_bound + kOffsetLoss + 12064) of e^eps s2 covers them where o_first != 0;
//      - underflow (absolute): each entry's term (exp, and v times a factor) and each
//        rebasing product round with an absolute error below kTinyNormal (the smallest
//        normal number of the type exp returns): at most (2 n + rebases) kTinyNormal in S,
//        times e^{eps - o} <= e^{kOffsetLoss + 1}. That is below e^{-3100} natively and
//        below e^{-640} under Emscripten (kOffsetLoss = 64 there), negligible against any
//        delta >= 1e-200, but allowed for in both directions everywhere.
//     DeltaAt adds these to (upper) or subtracts them from (lower) the curve.
#if defined(__EMSCRIPTEN__)
constexpr ld kOffsetLoss = 64;
constexpr ld kTinyNormal = DBL_MIN;
#else
constexpr ld kOffsetLoss = 8192;
constexpr ld kTinyNormal = kLdMin;
#endif

namespace {

// (9) The walk. Entries are summed from the top (j = n - 1) down; s1 and s2 after entry j
//     are the suffix sums DeltaAt needs at j. The walk's state before an anchor entry
//     (n - 1 - j a multiple of kAnchor) is s1, s2 and g: there the scale factors f1, f2 are
//     recomputed from exp (below), so the state fixes every later step. MakeCurve walks all
//     entries once and keeps the states at the anchors; Suffix restarts from the anchor at
//     or above the entry asked for and repeats the same steps, so it returns the sums the
//     full walk had there, bit for bit.
struct Walk {
  ld s1 = 0, s2 = 0;
  int64_t g = 0;  // offset index of (8)
  double f1 = 0, f2 = 0;
  bool in_range = false;
  int64_t rebases = 0;
};

// Adds entry j to the walk. w_j = v_j exp(log_scale - lambda l_j), w2_j = w_j e^{o - l_j},
// l_j = (start + j) h, o = g h the offset of (8). The scale factors are kept in double
// where their exponent is within +-700 and computed in long double otherwise (then only a
// few entries far in the tails); r1 = exp(-lambda h), r2 = exp(-(lambda + 1) h).
inline __attribute__((always_inline)) void Step(const DeltaCurve& d, int64_t j, double r1,
                                                   double r2, Walk* w) {
  const bool upper = d.bound == Bound::kUpper;
  const ld l = static_cast<ld>(d.start + j) * d.h;
  // (8): move the offset to l_j where l_j - o left [-kOffsetLoss, kOffsetLoss].
  bool rebased = false;
  if (std::fabs(static_cast<ld>(d.start + j - w->g) * d.h) > kOffsetLoss) {
    if (w->s2 > 0) {
      w->s2 *= std::exp(static_cast<ld>(d.start + j - w->g) * d.h);
      ++w->rebases;
    }
    w->g = d.start + j;
    rebased = true;
  }
  const ld l_rel = static_cast<ld>(d.start + j - w->g) * d.h;  // l_j - o
  const bool in_support = d.start + j >= d.support_lo && d.start + j <= d.support_hi;
  const ld v = !upper ? static_cast<ld>(d.tilted[j]) - d.entry_error
               : in_support ? static_cast<ld>(d.tilted[j]) + d.entry_error
                            : 0;
  // Walking downwards in j the exponents grow by lambda h: f_{j-1} = f_j / r.
  if ((d.n - 1 - j) % kAnchor == 0 || rebased) {
    const ld e1 = d.log_scale - d.lambda * l;
    // Within the next kAnchor entries the exponents grow by at most kAnchor (lambda+1) h.
    const ld drift = kAnchor * (d.lambda + 1) * d.h;
    w->in_range = std::fabs(e1) + drift < 700 && std::fabs(e1 - l_rel) + drift < 700;
    if (w->in_range) {
      w->f1 = std::exp(static_cast<double>(e1));
      w->f2 = std::exp(static_cast<double>(e1 - l_rel));
    }
  } else if (w->in_range) {
    w->f1 /= r1;
    w->f2 /= r2;
  }
  if (v > 0) {
    if (w->in_range) {
      w->s1 += v * w->f1;
      w->s2 += v * w->f2;
    } else {
      const ld lw = std::log(v) + d.log_scale - d.lambda * l;
      w->s1 += std::exp(lw);
      w->s2 += std::exp(lw - l_rel);
    }
  }
}

double R1(const DeltaCurve& d) { return std::exp(-static_cast<double>(d.lambda * d.h)); }
double R2(const DeltaCurve& d) { return std::exp(-static_cast<double>((d.lambda + 1) * d.h)); }

// The walk's sums and offset after entries n - 1, ..., j of one anchor block, decoded
// once per block: a scan over neighbouring entries (EpsilonFor) replays each block once.
struct SuffixBlock {
  int64_t anchor = -1;  // the block's top entry; -1: nothing decoded yet
  ld s1[kAnchor], s2[kAnchor];
  int64_t g[kAnchor];
};

// Sums and offset after entry j (j = n: nothing summed), see (9).
void Suffix(const DeltaCurve& d, int64_t j, SuffixBlock* block, ld* s1, ld* s2, int64_t* g) {
  if (j >= d.n) {
    *s1 = 0;
    *s2 = 0;
    *g = 0;
    return;
  }
  const int64_t k = (d.n - 1 - j) / kAnchor;
  const int64_t anchor = d.n - 1 - k * kAnchor;
  if (block->anchor != anchor) {
    Walk w;
    w.s1 = d.anchor_s1[k];
    w.s2 = d.anchor_s2[k];
    w.g = d.anchor_offset[k];
    const double r1 = R1(d), r2 = R2(d);
    for (int64_t i = anchor; i >= 0 && i > anchor - kAnchor; --i) {
      Step(d, i, r1, r2, &w);
      block->s1[anchor - i] = w.s1;
      block->s2[anchor - i] = w.s2;
      block->g[anchor - i] = w.g;
    }
    block->anchor = anchor;
  }
  *s1 = block->s1[anchor - j];
  *s2 = block->s2[anchor - j];
  *g = block->g[anchor - j];
}

}  // namespace

DeltaCurve MakeCurve(Composed c, Bound bound) {
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
  d.tilted = std::move(c.tilted);
  d.entry_error = c.entry_error;
  d.support_lo = c.support_lo;
  d.support_hi = c.support_hi;
  if (c.n > 0) {
    const ld l_max = std::max(std::fabs(static_cast<ld>(c.window_start) * c.h),
                              std::fabs(static_cast<ld>(c.window_start + c.n) * c.h));
    d.exponent_bound = std::fabs(c.log_scale) + std::fabs(c.lambda) * l_max + 1;
  }
  const int64_t anchors = (d.n + kAnchor - 1) / kAnchor;
  d.anchor_s1.reserve(anchors);
  d.anchor_s2.reserve(anchors);
  d.anchor_offset.reserve(anchors);
  const double r1 = R1(d), r2 = R2(d);
  Walk w;
  for (int64_t j = d.n - 1; j >= 0; --j) {
    if ((d.n - 1 - j) % kAnchor == 0) {
      d.anchor_s1.push_back(w.s1);
      d.anchor_s2.push_back(w.s2);
      d.anchor_offset.push_back(w.g);
    }
    Step(d, j, r1, r2, &w);
  }
  d.rebases = w.rebases;
  return d;
}

namespace {

ld DeltaAtWith(const DeltaCurve& c, ld eps, SuffixBlock* block) {
  ld sum = 0;
  if (c.n > 0) {
    // First entry with loss > eps.
    int64_t first = static_cast<int64_t>(std::floor(eps / c.h)) + 1 - c.start;
    while (first > 0 && static_cast<ld>(c.start + first - 1) * c.h > eps) --first;
    while (first < c.n && static_cast<ld>(c.start + first) * c.h <= eps) ++first;
    first = std::min<int64_t>(std::max<int64_t>(first, 0), c.n);
    // e^eps s2 = sum_{l_j > eps} w_j e^{eps - l_j} <= s1: computed as exp((eps - o) + log S)
    // with the offset o of (8), because e^eps alone overflows a long double for eps >
    // ~11356 (and 0 * inf is NaN), and s2 itself would underflow.
    ld s1, s2;
    int64_t g;
    Suffix(c, first, block, &s1, &s2, &g);
    const ld offset = static_cast<ld>(g) * c.h;
    const ld log_s2 = s2 > 0 ? std::log(s2) : 0;
    const ld x_s2 = s2 > 0 ? std::exp((eps - offset) + log_s2) : 0;
    // e^eps s2 <= s1, so both are finite unless the untilted weights themselves overflowed
    // a long double: with a huge tilt (lambda ~ 1e4 for epsilon ~ 1e4, e.g. sigma = 0.005)
    // the error allowance of an entry, entry_error e^{K - lambda l}, can exceed 1e4932.
    // Then only the trivial bounds are certain: delta <= 1 and delta >= 0.
    if (!std::isfinite(s1) || !std::isfinite(x_s2)) {
      return c.bound == Bound::kUpper ? 1 : 0;
    }
    sum = s1 - x_s2;
    // Rounding of the weights (kCurveUlps each) and of this difference: the error is
    // relative to the two terms, not to their (possibly much smaller) difference.
    ld rounding = (kCurveUlps * kUnit + 8 * kLdUnit) * (s1 + x_s2);
    // (8): the offset's roundings (where it is not 0) and the underflows.
    if (g != 0) {
      rounding += 2 * kLdUnit * x_s2 *
                  (static_cast<ld>(c.rebases) * (kOffsetLoss + 8) + std::fabs(offset) +
                   std::fabs(eps) + 2 * std::fabs(log_s2) + c.exponent_bound + kOffsetLoss +
                   12064);
    }
    rounding += std::exp(std::min<ld>(eps - offset, kOffsetLoss + 1) +
                         std::log(static_cast<ld>(2 * c.n + c.rebases + 2) * kTinyNormal));
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

}  // namespace

ld DeltaAt(const DeltaCurve& c, ld eps) {
  SuffixBlock block;
  return DeltaAtWith(c, eps, &block);
}

ld EpsilonFor(const DeltaCurve& c, ld delta, ld start_hint) {
  SuffixBlock block;
  const auto DeltaAt = [&](const DeltaCurve& curve, ld eps) {
    return DeltaAtWith(curve, eps, &block);
  };
  if (c.bound == Bound::kUpper) {
    if (DeltaAt(c, 0) <= delta) return 0;
    const ld hi = std::max<ld>(1, c.n > 0 ? static_cast<ld>(c.start + c.n) * c.h : 1);
    if (DeltaAt(c, hi) > delta) return std::numeric_limits<ld>::infinity();
    return Bisect<ld>(
               0, hi, [&](ld mid) { return DeltaAt(c, mid) <= delta; },
               [](ld lo, ld hi) { return !(hi - lo > 1e-13_ld * std::max<ld>(1, hi)); }, 200)
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
