#include "dpkit/accounting/internal/pld_discrete_gaussian.h"

#include <cmath>
#include <initializer_list>
#include <limits>

namespace dpkit::accounting::pld_internal {

int ExactSumSign(std::initializer_list<ld> values) {
  ld expansion[16];
  int size = 0;
  for (ld v : values) {
    ld q = v;
    int out = 0;
    for (int i = 0; i < size; ++i) {
      const ld sum = q + expansion[i];
      const ld b_virtual = sum - q;
      const ld err = (q - (sum - b_virtual)) + (expansion[i] - b_virtual);
      if (err != 0) expansion[out++] = err;
      q = sum;
    }
    expansion[out++] = q;
    size = out;
  }
  for (int i = size - 1; i >= 0; --i) {
    if (expansion[i] != 0) return expansion[i] > 0 ? 1 : -1;
  }
  return 0;
}

// Sign of ell(m) - t = ((m - D/2) D - s^2 t) / s^2 for an integer m with |m| < 2^62, computed
// exactly: m - D/2 is exact in long double, and each product is split exactly into a
// rounded value and its error with fma (TwoProduct).
int DiscreteLossSign(ld m, ld sensitivity, ld sigma, ld t) {
  const ld a = m - sensitivity / 2;
  const ld r1 = a * sensitivity, r2 = std::fma(a, sensitivity, -r1);
  const ld s1 = sigma * sigma, s2 = std::fma(sigma, sigma, -s1);
  const ld p1 = s1 * t, e1 = std::fma(s1, t, -p1);
  const ld p2 = s2 * t, e2 = std::fma(s2, t, -p2);
  return ExactSumSign({r2, -e2, -p2, -e1, -p1, r1});
}

BaseTails DiscreteGaussianBaseTails(const DiscreteGaussianTails& dg, ld sigma, ld sensitivity,
                                    ld t, ld t_err, Threshold threshold) {
  const bool inclusive = threshold == Threshold::kAtOrAbove;
  const ld scale = sigma * sigma / sensitivity;  // s^2 / D
  const ld tau = scale * t + sensitivity / 2;
  const ld tau_err = scale * t_err + 16 * kLdUnit * (scale * std::fabs(t) + sensitivity + 1);
  ld k = inclusive ? std::ceil(tau) : std::floor(tau) + 1;
  const ld m = std::nearbyint(tau);
  const bool near = std::fabs(tau - m) <= tau_err;
  const bool representable = std::fabs(tau) < 0x1p62_ld && tau_err < 0.25_ld;
  const bool exact = t_err == 0 && representable;
  if (near && exact) {
    // k is m or m + 1: the first integer whose loss is above t (at or above: inclusive).
    const int sign = DiscreteLossSign(m, sensitivity, sigma, t);
    k = (sign > 0 || (inclusive && sign == 0)) ? m : m + 1;
  }
  BaseTails r;
  dg.Split(k, &r.a_above, &r.a_below, &r.a_err);
  dg.Split(k - sensitivity, &r.b_above, &r.b_below, &r.b_err);
  r.atoms = k;
  if ((near && !exact) || !representable) {
    // The integers within tau_err of tau (at most 2 tau_err + 2 of them) may lie on the
    // other side: each moves its mass between the two sides of both pairs.
    const ld count = 2 * tau_err + 2;
    const ld nearest = std::max<ld>(0, std::fabs(tau) - tau_err - 1);
    const ld nearest_b = std::max<ld>(0, std::fabs(tau - sensitivity) - tau_err - 1);
    r.a_err += count * dg.PmfUpper(nearest);
    r.b_err += count * dg.PmfUpper(nearest_b);
    r.atoms = std::numeric_limits<ld>::quiet_NaN();
  }
  return r;
}

}  // namespace dpkit::accounting::pld_internal
