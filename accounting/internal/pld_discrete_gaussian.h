// Discrete-Gaussian tails: certified tail sums of N_Z(0, s^2) and the base tails of the
// discrete Gaussian's lattice-valued privacy loss (Canonne, Kamath, Steinke 2020).
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_DISCRETE_GAUSSIAN_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_DISCRETE_GAUSSIAN_H_

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"

namespace dpkit::accounting::pld_internal {

// Tail sums of the discrete Gaussian N_Z(0, s^2): p(x) = f(x) / Z on the integers,
// f(x) = e^{-x^2/(2 s^2)}, Z = sum_x f(x) (Canonne, Kamath, Steinke 2020, Def. 1), with a
// certified absolute error bound on every value. Only the small side U(k) = sum_{x>=k}
// f(x), k >= 1, is computed; the other side is 1 minus it (or by symmetry x -> -x).
//  * s <= kDirectSigma: U(k) is a suffix sum, summed from the far end in long double
//    (all terms positive: relative error <= (number of terms) u, plus the exp rounding
//    (x^2/(2 s^2) + 2) u per term), precomputed for k <= J = ceil(150.4 s) + 1, where
//    f(J) < e^{-11300}; the rest, sum_{x>J} f(x) <= f(J+1) / (1 - e^{-(2J+3)/(2s^2)})
//    (the ratios f(x+1)/f(x) decrease), is added to the error. Z = 1 + 2 U(1).
//  * s > kDirectSigma: Euler-Maclaurin summation with remainder of order 5 (DLMF 2.10.1;
//    the Fourier series of the periodic Bernoulli functions, DLMF 24.8.1-24.8.2, give
//    |B~_5(x)|/5! <= 2 zeta(5)/(2 pi)^5 < 2.2e-4):
//      U(a) = I(a) + f(a)/2 - f'(a)/12 + f'''(a)/720 + R,
//      |R| <= 2.2e-4 int_a^inf |f^(5)| = 2.2e-4 TV(f^(4) on [a, inf)),
//    with I(a) = int_a^inf f = s sqrt(pi/2) erfc(a/(s sqrt 2)) and, for y = x/s,
//    f^(n)(x) = (-1)^n He_n(y) f(x) / s^n (Hermite polynomials). The total variation of
//    f^(4) = He_4(y) e^{-y^2/2} / s^4 on [a, inf) is evaluated exactly from its values at
//    a and at the zeros y^2 = 5 -+ sqrt(10) of He_5 beyond a (f^(4) is monotone between
//    them). Relative to U the remainder is ~1e-4 y^5 / s^5: below 1e-9 for s > 512 and
//    every tail above 1e-300. Z = s sqrt(2 pi) (1 + 2 sum_{n>=1} e^{-2 pi^2 s^2 n^2}) by
//    Poisson summation; the correction is below e^{-5e6}. The main terms are accurate
//    to kCdfUlps (1 + y^2) ulps (erfc, and exp of -y^2/2).
// Both ways the computed U carries an explicit error bound, so cell masses formed from
// it are certified (BuildContinuousPmfs adds the bounds to the pessimistic cell data and
// subtracts them from the optimistic, as it does for the continuous bases' rounding).
class DiscreteGaussianTails {
 public:
  static constexpr ld kDirectSigma = 512;

  explicit DiscreteGaussianTails(ld sigma) : sigma_(sigma) {
    if (sigma_ <= kDirectSigma) {
      const int64_t j = static_cast<int64_t>(std::ceil(150.4_ld * sigma_)) + 1;
      suffix_.assign(j + 2, 0);  // suffix_[k] = sum_{x=k}^{j} f(x), k in [1, j]
      const ld inv = 1 / (2 * sigma_ * sigma_);
      ld sum = 0;
      for (int64_t x = j; x >= 1; --x) {
        const ld xx = static_cast<ld>(x);
        sum += std::exp(-xx * xx * inv);
        suffix_[x] = sum;
      }
      const ld next = static_cast<ld>(j + 1);
      beyond_ = std::exp(-next * next * inv) / -std::expm1(-(2 * next + 1) * inv);
      beyond_ = beyond_ * (1 + 1e-10_ld) + 4 * kLdMin;
      // Recursive summation of j positive terms (j ulps), each an exp of an argument
      // a <= 11400 computed to 3 ulps (so 3 a + 2 ulps of the term).
      suffix_rel_ = (static_cast<ld>(j) + 4 * 11400 + 16) * kLdUnit;
      z_ = 1 + 2 * suffix_[1];
      z_err_ = 2 * (beyond_ + suffix_rel_ * suffix_[1]) + 2 * kLdUnit * z_;
    } else {
      z_ = sigma_ * std::sqrt(2 * static_cast<ld>(M_PI));
      z_err_ = 8 * kLdUnit * z_;
    }
  }

  // P(X >= k) and P(X < k) = P(X >= 1 - k) for an integer-valued k (the smaller one
  // computed directly), and one absolute error bound for both (beyond kCdfUlps ulps).
  void Split(ld k, ld* above, ld* below, ld* err) const {
    ld small, small_err;
    if (k >= 1) {
      Upper(k, &small, &small_err);
      *above = small;
      *below = 1 - small;
    } else {
      Upper(1 - k, &small, &small_err);
      *below = small;
      *above = 1 - small;
    }
    // The rounding of 1 - small is relative to the larger value, within the kCdfUlps
    // that BuildContinuousPmfs allows for every tail; the stated error is the small one's
    // (relative to it: Q-tails are multiplied by e^loss, up to e^10000).
    *err = small_err;
  }

  // An upper bound on P(X = x).
  ld PmfUpper(ld x) const {
    const ld y = x / sigma_;
    return std::exp(-y * y / 2) / z_ * (1 + 1e-12_ld) + 4 * kLdMin;
  }
  // A lower bound on P(X = x) (exp of -y^2/2 to (1.5 y^2 + 1) ulps, Z to z_err).
  ld PmfLower(ld x) const {
    const ld y = x / sigma_;
    const ld f = std::exp(-y * y / 2);
    return std::max<ld>(0,
                        f * (1 - (2 * y * y + 8) * kLdUnit) / (z_ + z_err_) * (1 - 4 * kLdUnit));
  }

 private:
  // P(X >= k) for an integer-valued k >= 1, and an absolute error bound.
  void Upper(ld k, ld* value, ld* err) const {
    ld u, u_err;
    if (sigma_ <= kDirectSigma) {
      const int64_t last = static_cast<int64_t>(suffix_.size()) - 2;
      if (k > static_cast<ld>(last)) {
        u = 0;
        u_err = beyond_;
      } else {
        u = suffix_[static_cast<int64_t>(k)];
        u_err = beyond_ + suffix_rel_ * u;
      }
    } else {
      const ld y = k / sigma_;
      const ld f = std::exp(-y * y / 2);
      const ld integral = sigma_ * std::sqrt(static_cast<ld>(M_PI) / 2) *
                          std::erfc(y / std::sqrt(static_cast<ld>(2)));
      const ld s3 = sigma_ * sigma_ * sigma_;
      const ld d1 = -y * f / sigma_;                // f'(a)
      const ld d3 = -(y * y * y - 3 * y) * f / s3;  // f'''(a)
      u = integral + f / 2 - d1 / 12 + d3 / 720;
      const ld main = integral + f / 2 + std::fabs(d1) / 12 + std::fabs(d3) / 720;
      u_err = 2.2e-4_ld * FourthDerivativeVariation(y) / (s3 * sigma_) * 1.01_ld +
              kCdfUlps * kLdUnit * (1 + y * y) * main + 4 * kLdMin;
    }
    *value = u / z_;
    *err = (u_err + *value * z_err_) / z_ * (1 + 1e-10_ld) + 4 * kLdUnit * *value;
  }

  // Total variation of g(y) = He_4(y) e^{-y^2/2} on [y0, inf), y0 >= 0.
  static ld FourthDerivativeVariation(ld y0) {
    auto g = [](ld y) {
      const ld y2 = y * y;
      return (y2 * y2 - 6 * y2 + 3) * std::exp(-y2 / 2);
    };
    const ld c1 = std::sqrt(5 - std::sqrt(static_cast<ld>(10)));
    const ld c2 = std::sqrt(5 + std::sqrt(static_cast<ld>(10)));
    ld tv = 0, prev = g(y0);
    for (ld c : {c1, c2}) {
      if (c > y0) {
        const ld v = g(c);
        tv += std::fabs(v - prev);
        prev = v;
      }
    }
    return (tv + std::fabs(prev)) * (1 + 1e-12_ld);  // g -> 0 at infinity
  }

  ld sigma_;
  std::vector<ld> suffix_;
  ld beyond_ = 0, suffix_rel_ = 0;
  ld z_ = 1, z_err_ = 0;
};

// Sign (-1, 0, 1) of the exact sum of the values (Shewchuk 1997, Grow-Expansion: repeated
// TwoSum keeps the sum exactly as a non-overlapping expansion of increasing magnitude,
// whose sign is that of its largest nonzero component). At most 16 values; no overflow or
// underflow assumed.
int ExactSumSign(std::initializer_list<ld> values);

// Sign of ell(m) - t = ((m - D/2) D - s^2 t) / s^2 for an integer m with |m| < 2^62 (D the
// sensitivity, s = sigma), computed exactly.
int DiscreteLossSign(ld m, ld sensitivity, ld sigma, ld t);

// Base tails of the discrete Gaussian: A = N_Z(0, s^2), B = N_Z(D, s^2) with an integer
// sensitivity D. Both have the same normalising constant (Z is shift invariant over the
// integers), so on the integers ell(x) = log B(x)/A(x) = (2 x D - D^2)/(2 s^2): the loss
// takes the discrete values (D/s^2)(x - D/2), x integer, and
//   ell > t <=> x > tau = s^2 t / D + D/2,  ell >= t <=> x >= tau.
// A(ell > t) = P(X >= k), B(ell > t) = P(X >= k - D) with k the first integer above tau
// (at or above it when inclusive). t_err = 0 says that t is the exact threshold (the grid
// point itself, unsampled, or 0): an integer within rounding of tau is then placed by the
// exact sign test (atoms exactly on a grid point are common: e.g. ell = 0 for even D).
// Otherwise `t_err` bounds the error of t (the subsampling map); integers within the
// resulting error of tau may be on either side: their masses are added to the error
// bounds and `atoms` is left unknown (this needs a coincidence to ~1e-15 relative of a
// transcendental threshold with the lattice; it widens the bounds, never breaks them).
// `threshold` says on which side an atom exactly at t falls.
BaseTails DiscreteGaussianBaseTails(const DiscreteGaussianTails& dg, ld sigma, ld sensitivity,
                                    ld t, ld t_err, Threshold threshold);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_DISCRETE_GAUSSIAN_H_
