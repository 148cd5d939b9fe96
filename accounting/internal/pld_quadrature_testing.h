// Quadrature references for the PLD tests (testonly): hockey-stick divergences of output
// densities on the real line by adaptive Gauss-Kronrod, independent of the PLD code, and
// the two directions of a Poisson-sampled base built from them.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_QUADRATURE_TESTING_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_QUADRATURE_TESTING_H_

#include <algorithm>
#include <cmath>
#include <functional>

#include "boost/math/quadrature/gauss_kronrod.hpp"

namespace dpkit::accounting::pld_testing {

using Density = std::function<long double(long double)>;

// The hockey stick H_{e^eps}(P || Q) = int (p - e^eps q)_+ dy by adaptive Gauss-Kronrod
// (61 points, relative tolerance 1e-13) on `panels` equal panels of [lo, hi] (the densities
// are negligible outside; the panels keep the peaks and the kinks from being stepped over:
// each should be at most about half a standard deviation wide).
inline long double HockeyStick(const Density& p, const Density& q, long double eps, long double lo,
                               long double hi, int panels = 200) {
  const long double x = std::exp(eps);
  const auto f = [&](long double y) { return std::max(0.0L, p(y) - x * q(y)); };
  long double sum = 0;
  for (int i = 0; i < panels; ++i) {
    const long double a = lo + (hi - lo) * i / panels, b = lo + (hi - lo) * (i + 1) / panels;
    sum += boost::math::quadrature::gauss_kronrod<long double, 61>::integrate(f, a, b, 15, 1e-13L);
  }
  return sum;
}

inline long double Normal(long double y, long double mean, long double sd) {
  const long double u = (y - mean) / sd;
  return std::exp(-u * u / 2) / (sd * std::sqrt(2 * M_PIl));
}

inline long double LaplaceDensity(long double y, long double mean, long double b) {
  return std::exp(-std::fabs(y - mean) / b) / (2 * b);
}

// The two directions of PoissonSampled(p, base) as hockey sticks of the base pair (B, A)
// with densities b, a: remove H((1-p) A + p B || A), add H(A || (1-p) A + p B).
struct Directions {
  Density a, b;
  long double p, lo, hi;
  long double Remove(long double eps) const {
    const Density mix = [&](long double y) { return (1 - p) * a(y) + p * b(y); };
    return HockeyStick(mix, a, eps, lo, hi);
  }
  long double Add(long double eps) const {
    const Density mix = [&](long double y) { return (1 - p) * a(y) + p * b(y); };
    return HockeyStick(a, mix, eps, lo, hi);
  }
};

inline Directions GaussianDirections(long double z, long double p) {
  return {[z](long double y) { return Normal(y, 0, z); },
          [z](long double y) { return Normal(y, 1, z); }, p, -40 * z, 1 + 40 * z};
}

inline Directions LaplaceDirections(long double b, long double p) {
  return {[b](long double y) { return LaplaceDensity(y, 0, b); },
          [b](long double y) { return LaplaceDensity(y, 1, b); }, p, -80 * b, 1 + 80 * b};
}

// The same two curves for the Gaussian base (A = N(0, z^2), B = N(1, z^2)) in closed form:
// the loss L(y) = log(1 - p + p e^{(2y - 1)/(2 z^2)}) is increasing in y, so each hockey
// stick is a difference of normal tails at the threshold where L = eps (remove) or
// L = -eps (add).
inline long double NormalTail(long double t) { return std::erfc(t / std::sqrt(2.0L)) / 2; }

inline long double GaussianRemoveCurve(long double z, long double p, long double eps) {
  const long double x = std::exp(eps);
  if (x <= 1 - p) return 1 - x;  // every loss is above log(1 - p) >= eps
  const long double y = z * z * std::log((x - 1 + p) / p) + 0.5L;
  return (1 - p) * NormalTail(y / z) + p * NormalTail((y - 1) / z) - x * NormalTail(y / z);
}

inline long double GaussianAddCurve(long double z, long double p, long double eps) {
  const long double x = std::exp(eps);
  if (1 / x <= 1 - p) return 0;  // no y has L(y) < -eps
  const long double y = z * z * std::log((1 / x - 1 + p) / p) + 0.5L;
  return NormalTail(-y / z) - x * ((1 - p) * NormalTail(-y / z) + p * NormalTail((1 - y) / z));
}

}  // namespace dpkit::accounting::pld_testing

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_QUADRATURE_TESTING_H_
