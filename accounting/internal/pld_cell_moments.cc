#include "dpkit/accounting/internal/pld_cell_moments.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace dpkit::accounting::pld_internal {

// (2b) Cell moments of the Gaussian base by quadrature. A cell's moments c = A - e^a B and
// d = e^b B - A (2, 3a) are of second order in the cell width, while the tails they are
// formed from carry absolute errors of kCdfUlps ulps of the tail values. Connect-the-dots
// divides them by e^h - 1, so the relative error of a grid mass grows as 1/h and compounds
// over T steps (q 1e-4, sigma 20, T 1e6: 1e-7 per step at h 1e-7, a 12 % gap). For the
// Gaussian base both moments reduce to integrals of non-negative, smooth integrands, which
// Gauss-Legendre quadrature evaluates to a relative accuracy with a certified bound:
//  * Base pair: P_b = N(1, s^2), Q_b = N(0, s^2), ell(o) = (2o - 1)/(2 s^2); in the
//    standardised variable z = (o - 1)/s of P_b, ell = z/s + 1/(2 s^2), so on the base
//    cell ell in (u, v], i.e. z in (z_u, z_v], z_x = s x - 1/(2 s), W = z_v - z_u:
//      C(u, v) = P_b(I) - e^u Q_b(I) = int phi(z) (1 - e^{u - ell}) dz
//              = phi(z_u) int_0^W e^{-z_u y - y^2/2} (-expm1(-y/s)) dy,
//      D(u, v) = e^v Q_b(I) - P_b(I) = phi(z_u) int_0^W e^{-z_u y - y^2/2} expm1((W - y)/s) dy
//    (y = z - z_u; phi(z_u + y) = phi(z_u) e^{-z_u y - y^2/2}; Q_b's density is
//    e^{-ell} times P_b's).
//  * Subsampled pairs (LossTailsAt) with r = e^ell: remove, P = (1-q) Q_b + q P_b, Q = Q_b:
//    on the cell (a, b] of L = log(1 - q + q r), whose base cell is (t_a, t_b] with
//    e^{t_a} = 1 + (e^a - 1)/q, c = int (1 - q + q r - e^a) dQ_b = q int (r - e^{t_a}) dQ_b
//    = q C(t_a, t_b) and d = q D(t_a, t_b). Add, P = Q_b, Q = (1-q) Q_b + q P_b,
//    L = -log(1 - q + q r): the base cell is [t'_b, t'_a) with e^{-a} = 1 - q + q e^{t'_a};
//    then 1 - e^a (1 - q + q r) = q e^a (e^{t'_a} - r), so c = q e^a D(t'_b, t'_a) and
//    likewise d = q e^b C(t'_b, t'_a). q = 1: t = l (remove), t' = -l (add).
//  * Truncation: for f analytic in the Bernstein ellipse E_rho (foci -1, 1, semi-axis sum
//    rho) with |f| <= M there, the n-point Gauss rule on [-1, 1] errs by at most
//    64 M / (15 (1 - rho^-2) rho^{2n}) (Trefethen 2008, "Is Gauss quadrature better than
//    Clenshaw-Curtis?", Thm. 4.5; Approximation Theory and Approximation Practice,
//    Thm. 19.3); on [0, W] times W/2. With y = (W/2)(1 + xi), xi in E_rho: |y| and
//    |W - y| <= Y = (W/2)(1 + R), R = (rho + 1/rho)/2, |Im y| <= (W/2)(rho - 1/rho)/2 = b,
//    Re(-z_u y) <= max(-z_u Y, z_u (W/2)(R - 1)), |e^{-y^2/2}| <= e^{b^2/2} and
//    |expm1(w)| <= e^{|w|} - 1 <= |w| e^{|w|}, so M = e^{max(...) + b^2/2 + Y/s} Y/s. The
//    smallest bound over rho = 2, 4, ..., 2^12 (stopping where it starts to grow) is used,
//    for n = 5 or, where that bound is not far below the accuracy needed, n = 10.
//  * Rounding: all terms are positive; the evaluations (exp of arguments up to
//    |z_u| W + W^2 + z_u^2/2) stay within 64 (8 + |z_u| W + W^2 + z_u^2) ulps relative, and
//    the rule (Newton's method in long double, checked against the exact moments of
//    polynomials in pld_cell_moments_test.cc) within 256 ulps.
//  * Endpoints: the thresholds carry errors (SubsampledThreshold, and the rounding of the
//    grid value l = k h itself, which moves t by u |l| e^{l - t} / q). The integral above
//    is taken between the computed z_u and z_u + W; the exact endpoints are within e_u, e_v
//    of them. dC/dz_v = phi(z_v)(1 - e^{-W/s}) and |dC/dz_u| <= (1/s) int phi, so
//    |dC| <= phi_max (W'/s)(e_u + e_v); dD/dz_u = -phi(z_u) expm1(W/s) and
//    dD/dz_v <= (1/s) e^{W/s} int phi, so |dD| <= phi_max (W'/s) e^{W'/s} (e_u + e_v)
//    (expm1(x) <= x e^x), with W' = W + e_u + e_v and phi_max the largest density on the
//    widened interval.
//  * Applied where |z| <= 36 at both ends, |z_u| W <= 40 and W <= 4 (elsewhere the tail
//    differences are precise enough, or the mass negligible).
// BuildContinuousPmfs intersects these enclosures with the tail-difference ones.

namespace {

// The quadrature's arithmetic: ld (long double natively, double under Emscripten, where
// long double arithmetic is software binary128; accounting/internal/pld_real.h).
using QuadFloat = ld;

}  // namespace

const GaussLegendreRule& GlRule(int r) {
  static const std::vector<GaussLegendreRule> rules = [] {
    std::vector<GaussLegendreRule> out;
    for (int n : kGlPoints) {
      GaussLegendreRule g{};
      g.n = n;
      for (int i = 0; i < n; ++i) {
        ld x = std::cos(static_cast<ld>(M_PI) * (i + 0.75_ld) / (n + 0.5_ld));
        ld derivative = 1;
        for (int iter = 0; iter < 60; ++iter) {
          ld p0 = 1, p1 = x;  // P_{k-1}, P_k
          for (int k = 2; k <= n; ++k) {
            const ld p2 = ((2 * k - 1) * x * p1 - (k - 1) * p0) / k;
            p0 = p1;
            p1 = p2;
          }
          derivative = n * (x * p1 - p0) / (x * x - 1);
          x -= p1 / derivative;
        }
        g.node[i] = x;
        g.weight[i] = 2 / ((1 - x * x) * derivative * derivative);
      }
      // Exactly symmetric (GaussianCellMoments pairs y with W - y).
      for (int i = 0; i < n / 2; ++i) {
        g.node[n - 1 - i] = -g.node[i];
        g.weight[n - 1 - i] = g.weight[i];
      }
      if (n % 2 == 1) g.node[n / 2] = 0;
      for (int k = 1; k <= kRhoSteps; ++k) {
        const ld rho = std::ldexp(1.0_ld, k);
        g.trunc_log[k - 1] = std::log1p((rho + 1 / rho) / 2) - std::log1p(-1 / (rho * rho)) -
                             2 * n * k * std::log(2.0_ld);
      }
      out.push_back(g);
    }
    return out;
  }();
  return rules[r];
}

bool GaussianCellMoments(ld s, ld u, ld u_err, ld v, ld v_err, ld target, CellMoments* out) {
  const ld zu = s * u - 0.5_ld / s;
  const ld w = s * (v - u);
  const ld beta = -zu;
  // |z| <= 36: phi(z) > 1e-282, far from underflow also where the long double functions
  // compute in double (Emscripten, see kLdUnit); the integrand stays within e^{+-40}.
  if (!(w > 0) || !(std::fabs(zu) <= 36) || !(std::fabs(zu + w) <= 36) ||
      !(std::fabs(beta) * w <= 40) || !(w <= 4)) {
    return false;
  }
  // The sums and the truncation bound in QuadFloat.
  const QuadFloat qw = static_cast<QuadFloat>(w), qs = static_cast<QuadFloat>(s);
  const QuadFloat qbeta = static_cast<QuadFloat>(beta);
  // Truncation bound of rule r (without the factor phi(z_u)), from (2b) with
  // expm1(x) <= x e^x: (W/2) (64/15) e^{arg + Y/s} (Y/s) / ((1 - rho^-2) rho^{2n}),
  // Y = (W/2)(1 + R), minimised over rho = 2^k in the log domain (one exp).
  auto truncation = [&](const GaussLegendreRule& g) -> ld {
    QuadFloat best = std::numeric_limits<QuadFloat>::infinity();
    for (int k = 1; k <= kRhoSteps; ++k) {
      const QuadFloat rho = std::ldexp(QuadFloat{1}, k);
      const QuadFloat big_r = (rho + 1 / rho) / 2, im = qw / 2 * (rho - 1 / rho) / 2;
      const QuadFloat y_max = qw / 2 * (1 + big_r);
      const QuadFloat re = std::max(qbeta * y_max, -qbeta * qw / 2 * (big_r - 1));
      const QuadFloat arg = re + im * im / 2;
      if (arg > 600) break;
      const QuadFloat log_bound =
          arg + y_max / qs + static_cast<QuadFloat>(g.trunc_log[k - 1]);
      if (log_bound > best) break;
      best = log_bound;
    }
    if (!(best < 600)) return std::numeric_limits<ld>::infinity();
    // The log-domain sum carries at most ~700 |terms| ulps: (1 + 1e-9) covers its exp.
    return static_cast<ld>(std::exp(best)) * (w / 2) * (w / 2) * 64 / (15 * s) * (1 + 1e-9_ld);
  };
  const ld phi_u = std::exp(-zu * zu / 2) / std::sqrt(2 * static_cast<ld>(M_PI));
  ld sc = 0, sd = 0, trunc = 0;
  for (int r = 0; r < kGlRules; ++r) {
    const GaussLegendreRule& g = GlRule(r);
    // The nodes are symmetric, y_{n-1-i} = W - y_i: expm1((W - y_i)/s) = e[n-1-i], and
    // -expm1(-y/s) = e / (1 + e) with e = expm1(y/s).
    QuadFloat y[kGlMaxPoints], e[kGlMaxPoints], qc = 0, qd = 0;
    for (int i = 0; i < g.n; ++i) {
      y[i] = qw / 2 * (1 + static_cast<QuadFloat>(g.node[i]));
      e[i] = std::expm1(y[i] / qs);
    }
    for (int i = 0; i < g.n; ++i) {
      const QuadFloat f =
          static_cast<QuadFloat>(g.weight[i]) * std::exp(qbeta * y[i] - y[i] * y[i] / 2);
      qc += f * (e[i] / (1 + e[i]));
      qd += f * e[g.n - 1 - i];
    }
    sc = qc;
    sd = qd;
    trunc = truncation(g);
    if (trunc <= 1e-3_ld * target * std::min(sc, sd) * (w / 2)) break;
  }
  if (!(trunc < std::numeric_limits<ld>::infinity())) return false;
  const ld c = phi_u * w / 2 * sc;
  const ld d = phi_u * w / 2 * sd;
  trunc *= phi_u * (1 + 1e-10_ld);
  const ld rel = 64 * kLdUnit * (8 + std::fabs(beta) * w + w * w + zu * zu) + 256 * kLdUnit;
  // Endpoint errors.
  const ld e_u = s * u_err + 4 * kLdUnit * (s * std::fabs(u) + 1 / s);
  const ld e_v = e_u + s * (u_err + v_err) + 4 * kLdUnit * (w + s * std::fabs(v));
  const ld w_wide = w + e_u + e_v;
  const ld z_lo = zu - e_u, z_hi = zu + w + e_v;
  const ld nearest = z_lo <= 0 && z_hi >= 0 ? 0 : std::min(std::fabs(z_lo), std::fabs(z_hi));
  const ld phi_max = std::exp(-nearest * nearest / 2) / std::sqrt(2 * static_cast<ld>(M_PI)) *
                     (1 + 8 * kLdUnit * (nearest * nearest + 4));
  const ld dc = phi_max * (w_wide / s) * (e_u + e_v);
  // expm1(x) <= x e^x.
  const ld grow = std::exp(w_wide / s) * (1 + 8 * kLdUnit * (w_wide / s + 2));
  const ld dd = phi_max * (w_wide / s) * grow * (e_u + e_v);
  out->c = c;
  out->d = d;
  out->c_err = (trunc + rel * c + dc) * 1.01_ld + 4 * kLdMin;
  out->d_err = (trunc + rel * d + dd) * 1.01_ld + 4 * kLdMin;
  return true;
}

ld GridThresholdError(ld q, ld l_signed, const LossTails& tails) {
  if (l_signed == 0) return 0;
  if (q == 1) return kLdUnit * std::fabs(l_signed);
  return tails.t_err + 2 * kLdUnit * std::fabs(l_signed) * std::exp(l_signed - tails.t) / q;
}

bool GaussianLossCellMoments(const Mechanism& m, Direction dir, ld l_a, const LossTails& at_a,
                             ld l_b, const LossTails& at_b, ld target, CellMoments* out) {
  const ld q = m.sampling_rate, s = m.parameter;
  if (!std::isfinite(at_a.t) || !std::isfinite(at_b.t)) return false;
  const ld sign = dir == Direction::kRemove ? 1 : -1;
  const ld ta = at_a.t, tb = at_b.t;
  const ld ta_err = GridThresholdError(q, sign * l_a, at_a);
  const ld tb_err = GridThresholdError(q, sign * l_b, at_b);
  CellMoments base;
  if (dir == Direction::kRemove) {
    if (!GaussianCellMoments(s, ta, ta_err, tb, tb_err, target, &base)) return false;
    *out = {q * base.c, q * base.c_err + 4 * kLdUnit * q * base.c,
            q * base.d, q * base.d_err + 4 * kLdUnit * q * base.d};
    return true;
  }
  if (!GaussianCellMoments(s, tb, tb_err, ta, ta_err, target, &base)) return false;
  // c = q e^a D, d = q e^b C; exp of l carries (|l| + 2) ulps.
  const ld fa = q * std::exp(l_a), fb = q * std::exp(l_b);
  const ld ra = 8 * kLdUnit * (std::fabs(l_a) + 2), rb = 8 * kLdUnit * (std::fabs(l_b) + 2);
  *out = {fa * base.d, fa * base.d_err * (1 + ra) + ra * fa * base.d,
          fb * base.c, fb * base.c_err * (1 + rb) + rb * fb * base.c};
  // e^l overflows double (Emscripten's exp) above ~709: such cells keep the tail differences.
  return std::isfinite(out->c) && std::isfinite(out->c_err) && std::isfinite(out->d) &&
         std::isfinite(out->d_err);
}

#if defined(__EMSCRIPTEN__)
constexpr ld kQuadratureBudget = 1e-6_ld;
#else
constexpr ld kQuadratureBudget = 1e-4_ld;
#endif
ld QuadratureTrigger(double steps) {
  return std::clamp<ld>(kQuadratureBudget / std::max(steps, 1.0), 1e-12_ld, 1e-8_ld);
}

}  // namespace dpkit::accounting::pld_internal
