#include "dpkit/accounting/internal/pld_loss_tails.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace dpkit::accounting::pld_internal {

ld NormalUpper(ld z) { return 0.5_ld * std::erfc(z / std::sqrt(2.0_ld)); }

BaseTails GaussianTails(ld sigma, ld t, ld t_err) {
  // A = N(0, s^2), B = N(1, s^2): ell(o) = (2o - 1)/(2 s^2); ell > t <=> o > s^2 t + 1/2.
  BaseTails r;
  const ld za = sigma * t + 0.5_ld / sigma;
  const ld zb = sigma * t - 0.5_ld / sigma;
  // (The errors of za and zb are added below, once the tails are known.)
  if (za >= 0) {
    r.a_above = NormalUpper(za);
    r.a_below = 1 - r.a_above;
  } else {
    r.a_below = NormalUpper(-za);
    r.a_above = 1 - r.a_below;
  }
  if (zb >= 0) {
    r.b_above = NormalUpper(zb);
    r.b_below = 1 - r.b_above;
  } else {
    r.b_below = NormalUpper(-zb);
    r.b_above = 1 - r.b_below;
  }
  // Each tail moves by at most the density near z times the error of z: the threshold's
  // (s t_err) plus the rounding of s t +- 1/(2 s) (a few ulps of s |t| + 1/s, which the
  // kCdfUlps allowance does not cover where |z| is large, or where s t and 1/(2 s) cancel).
  // The density without another exp: phi(z) <= 0.4, and for |z| >= 1 the Mills ratio gives
  // phi(z) <= (smaller tail) (1 + z^2) / |z|; dz is far below 1/|z|, so the factor 2 also
  // covers phi's change over [|z| - dz, |z| + dz].
  const ld dz = sigma * t_err + 4 * kLdUnit * (sigma * std::fabs(t) + 1 / sigma);
  auto density = [](ld z, ld tail) {
    const ld a = std::fabs(z);
    return a >= 1 ? std::min<ld>(0.4_ld, tail * (1 + a * a) / a) : 0.4_ld;
  };
  r.a_err = 2 * density(za, std::min(r.a_above, r.a_below)) * dz;
  r.b_err = 2 * density(zb, std::min(r.b_above, r.b_below)) * dz;
  return r;
}

BaseTails LaplaceTails(ld b, ld t, Threshold threshold, ld t_err) {
  const bool inclusive = threshold == Threshold::kAtOrAbove;
  // A = Lap(0, b), B = Lap(1, b): ell(o) = (|o| - |o - 1|)/b in [-1/b, 1/b], with atoms
  // A(ell = -1/b) = 1/2, A(ell = 1/b) = e^{-1/b}/2, B(ell = -1/b) = e^{-1/b}/2,
  // B(ell = 1/b) = 1/2. Inside, ell > t <=> o > (b t + 1)/2.
  const ld lo = -1 / b, hi = 1 / b;
  const bool all = inclusive ? t <= lo : t < lo;
  const bool none = inclusive ? t > hi : t >= hi;
  ld err = 0;
  if (t_err > 0) {
    err = t_err / 2;
    if (std::fabs(t - lo) <= 2 * t_err || std::fabs(t - hi) <= 2 * t_err) err += 0.5_ld;
  }
  if (all) {
    BaseTails r{1, 0, 1, 0};
    r.a_err = r.b_err = err;
    return r;
  }
  if (none) {
    BaseTails r{0, 1, 0, 1};
    r.a_err = r.b_err = err;
    return r;
  }
  const ld o = std::min<ld>(1, std::max<ld>(0, (b * t + 1) / 2));
  BaseTails r;
  r.a_above = 0.5_ld * std::exp(-o / b);
  r.a_below = 1 - r.a_above;
  r.b_below = 0.5_ld * std::exp(-(1 - o) / b);
  r.b_above = 1 - r.b_below;
  // The exponents o/b and (1 - o)/b carry the rounding of o (a few ulps of |b t| + 1, over
  // b) and of the division: a relative error of the exp beyond what kCdfUlps covers where
  // 1/b or |t| is large.
  const ld rel = 4 * kLdUnit * (std::fabs(t) + 2 / b + 2);
  r.a_err = err + rel * r.a_above;
  r.b_err = err + rel * r.b_below;
  return r;
}

BaseTails BaseTailsAt(const Mechanism& m, ld t, ld t_err, Threshold threshold,
                      const DiscreteGaussianTails* dg) {
  if (m.base == Base::kGaussian) return GaussianTails(m.parameter, t, t_err);
  if (m.base == Base::kDiscreteGaussian) {
    return DiscreteGaussianBaseTails(*dg, m.parameter, static_cast<ld>(m.sensitivity), t, t_err,
                                     threshold);
  }
  return LaplaceTails(m.parameter, t, threshold, t_err);
}

ld SubsampledThreshold(ld l, ld q, ld* t_err) {
  // t = log(1 + (e^l - 1)/q) (the caller checked e^l - 1 + q > 0, i.e. r > -1), computed
  // as log1p(r) so that its error is relative to t (log(v) - log(q) would carry an absolute
  // error of a few ulps of |log q| even where t is tiny, e.g. t ~ 1e-3 for q = 1e-4).
  const ld r = std::expm1(l) / q;
  const ld t = std::log1p(r);
  // r carries expm1's 2 ulps and the division's 1 (3 ulps relative); log1p moves that by
  // |dr| / (1 + r) and adds 2 ulps of t. Factor 2 of margin.
  *t_err = 2 * (4 * kLdUnit * std::fabs(r) / (1 + r) + 2 * kLdUnit * std::fabs(t)) +
           kLdMin;
  return t;
}

LossTails LossTailsAt(const Mechanism& m, Direction dir, ld l,
                      const DiscreteGaussianTails* dg) {
  const ld q = m.sampling_rate;
  if (dir == Direction::kRemove) {
    // P = (1-q) A + q B, Q = A, L = log(1 - q + q e^ell) (Zhu, Dong, Wang 2022, Sec. 5).
    // The grid point is l itself (t_err = 0: the lattice base places atoms against it
    // exactly); the subsampling map is exact at l = 0 only.
    ld t, t_err = 0;
    if (q == 1 || l == 0) {
      t = q == 1 ? l : 0;
    } else {
      if (std::expm1(l) + q <= 0) return {1, 0, 1, 0};
      t = SubsampledThreshold(l, q, &t_err);
    }
    const BaseTails b = BaseTailsAt(m, t, t_err, Threshold::kAbove, dg);
    return {(1 - q) * b.a_above + q * b.b_above, (1 - q) * b.a_below + q * b.b_below,
            b.a_above, b.a_below, (1 - q) * b.a_err + q * b.b_err, b.a_err, b.atoms, t, t_err};
  }
  // P = A, Q = (1-q) A + q B, L = -log(1 - q + q e^ell): L > l <=> ell < t'.
  ld t, t_err = 0;
  if (q == 1 || l == 0) {
    t = q == 1 ? -l : 0;
  } else {
    if (std::expm1(-l) + q <= 0) return {0, 1, 0, 1};
    t = SubsampledThreshold(-l, q, &t_err);
  }
  const BaseTails b = BaseTailsAt(m, t, t_err, Threshold::kAtOrAbove, dg);
  // b.*_above = P(ell >= t') = P(L <= l); b.*_below = P(ell < t') = P(L > l).
  return {b.a_below, b.a_above, (1 - q) * b.a_below + q * b.b_below,
          (1 - q) * b.a_above + q * b.b_above, b.a_err, (1 - q) * b.a_err + q * b.b_err,
          b.atoms, t, t_err};
}

}  // namespace dpkit::accounting::pld_internal
