// The quadrature enclosures of the Gaussian cell moments ((2b), pld_cell_moments) against the
// tail-difference formula evaluated with 50 significant digits.
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_testing.h"
#include "boost/math/special_functions/erf.hpp"
#include "boost/multiprecision/cpp_bin_float.hpp"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

using Big = boost::multiprecision::cpp_bin_float_50;
constexpr pld_internal::Direction kRemove = pld_internal::Direction::kRemove;
constexpr pld_internal::Direction kAdd = pld_internal::Direction::kAdd;

Big PhiUpper(const Big& x) { return boost::math::erfc(x / sqrt(Big(2))) / 2; }

// c = P(cell) - e^a Q(cell) and d = e^b Q(cell) - P(cell) for the cell (a, b] of the loss
// of N(0, s^2) vs N(1, s^2), Poisson-sampled at rate q (Zhu, Dong, Wang 2022, Sec. 5):
// remove P = (1-q) A + q B, Q = A, L = log(1 - q + q e^ell); add P = A,
// Q = (1-q) A + q B, L = -log(1 - q + q e^ell); the base loss ell > t is o > s^2 t + 1/2.
// At 50 digits the cancellation in c and d (at most ~25 digits here) leaves > 20 digits.
std::pair<Big, Big> ReferenceMoments(double sigma, double q_in, bool add, long double a_in,
                                     long double b_in) {
  const Big s(sigma), q(q_in), a(a_in), b(b_in);
  auto threshold = [&](const Big& l) { return log((exp(l) - 1 + q) / q); };
  auto a_above = [&](const Big& t) { return PhiUpper(s * t + 1 / (2 * s)); };
  auto b_above = [&](const Big& t) { return PhiUpper(s * t - 1 / (2 * s)); };
  Big p_mass, q_mass;
  if (!add) {
    const Big ta = threshold(a), tb = threshold(b);
    const Big in_a = a_above(ta) - a_above(tb), in_b = b_above(ta) - b_above(tb);
    p_mass = (1 - q) * in_a + q * in_b;
    q_mass = in_a;
  } else {
    const Big ta = threshold(-a), tb = threshold(-b);  // base cell [tb, ta)
    const Big in_a = a_above(tb) - a_above(ta), in_b = b_above(tb) - b_above(ta);
    p_mass = in_a;
    q_mass = (1 - q) * in_a + q * in_b;
  }
  return {p_mass - exp(a) * q_mass, exp(b) * q_mass - p_mass};
}

// The grid cell (k h, (k + 1) h] holding the privacy loss of the base output at standard
// score z under B (the loss l = +-log(1 - q + q e^ell), ell = z/sigma + 1/(2 sigma^2)).
std::pair<long double, long double> CellAtScore(double sigma, double q, bool add, double h,
                                                double z) {
  const long double ell = z / sigma + 0.5L / (sigma * sigma);
  const long double l = std::log1p(q * std::expm1(ell)) * (add ? -1 : 1);
  const long double k = std::floor(l / h);
  return {k * h, (k + 1) * h};
}

TEST(PldCellMomentsTest, GaussLegendreRulesIntegratePolynomialsExactly) {
  EXPECT_TRUE(GaussLegendreRuleForTesting(7).empty());
  for (int n : {5, 10}) {
    const auto rule = GaussLegendreRuleForTesting(n);
    ASSERT_EQ(rule.size(), static_cast<size_t>(n));
    // An n-point rule is exact for degree 2n - 1, and not for x^{2n}.
    for (int k = 0; k <= 2 * n; ++k) {
      long double sum = 0, abs_sum = 0;
      for (const auto& [x, w] : rule) {
        sum += w * std::pow(x, k);
        abs_sum += std::fabs(w * std::pow(x, k));
      }
      const long double exact = k % 2 == 1 ? 0 : 2.0L / (k + 1);
      if (k < 2 * n) {
        EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(exact),
                    static_cast<double>(64 * LDBL_EPSILON * abs_sum))
            << n << " points, x^" << k;
      } else {
        EXPECT_GT(std::fabs(sum - exact), 1e-6L) << n << " points, x^" << k;
      }
    }
  }
}

// Cells across the bulk and tails of the law, at spacings from 1e-7 to 1e-2.
TEST(PldCellMomentsTest, EnclosuresContainTheExactMomentsAndAreTight) {
  int applied = 0;
  for (double sigma : {0.5, 1.1, 5.0, 20.0}) {
    for (double q : {1e-4, 0.004, 0.3, 1.0}) {
      for (bool add : {false, true}) {
        for (double h : {1e-7, 1e-5, 1e-3, 1e-2}) {
          for (double z : {-4.0, -1.0, 0.0, 1.5, 5.0}) {
            const auto [a, b] = CellAtScore(sigma, q, add, h, z);
            auto enc = GaussianCellMomentsForTesting(sigma, q, add ? kAdd : kRemove, a, b);
            if (!enc.ok()) continue;
            ++applied;
            const auto [c_ref, d_ref] = ReferenceMoments(sigma, q, add, a, b);
            const long double c = static_cast<long double>(c_ref);
            const long double d = static_cast<long double>(d_ref);
            SCOPED_TRACE(::testing::Message()
                         << "sigma " << sigma << " q " << q << (add ? " add" : " remove")
                         << " h " << h << " z " << z << " c " << static_cast<double>(c)
                         << " d " << static_cast<double>(d));
            ASSERT_GT(c, 0);
            ASSERT_GT(d, 0);
            // Certified: the exact moments lie in the enclosures (the reference's own
            // error, below 1e-20 relative, is far inside the margin below).
            EXPECT_LE(std::fabs(enc->c - c), enc->c_err * (1 + 1e-6L));
            EXPECT_LE(std::fabs(enc->d - d), enc->d_err * (1 + 1e-6L));
            // Tight, which is what (2b) is for: the tail differences leave relative
            // widths of 1e-7 at sigma 20, q 1e-4, h 1e-7, and of order one at q = 1,
            // h 1e-7. The quadrature's width is set by the thresholds' ulps over the base
            // cell width W (in P's standard units) where W is small, and by the
            // truncation bound where W is wide against the density's scale (W > 1: then
            // the tail differences are precise and BuildContinuousPmfs keeps them).
            const long double sign = add ? -1 : 1;
            const long double w = sigma * std::fabs(std::log1p(std::expm1(sign * b) / q) -
                                                    std::log1p(std::expm1(sign * a) / q));
            if (w <= 1) {
              const long double limit = w < 1e-5 ? 1e-9L : 1e-10L;
              EXPECT_LT(enc->c_err, limit * c) << "W " << static_cast<double>(w);
              EXPECT_LT(enc->d_err, limit * d) << "W " << static_cast<double>(w);
            }
          }
        }
      }
    }
  }
  EXPECT_GE(applied, 200);
}

// The corner that needs (2b): q 1e-4, sigma 20, grids down to 1e-7; every cell of the bulk
// (base scores -6 to 6) is enclosed by the quadrature to 1e-12.
TEST(PldCellMomentsTest, AppliesAcrossTheBulkOfTheTinyEpsilonCorner) {
  const double sigma = 20, q = 1e-4;
  for (double h : {1e-7, 1e-6}) {
    for (bool add : {false, true}) {
      for (double z = -6; z <= 6; z += 0.25) {
        const auto [a, b] = CellAtScore(sigma, q, add, h, z);
        auto enc = GaussianCellMomentsForTesting(sigma, q, add ? kAdd : kRemove, a, b);
        ASSERT_TRUE(enc.ok()) << enc.error() << " z " << z;
        EXPECT_LT(enc->c_err, 1e-12L * enc->c) << "z " << z << " h " << h;
        EXPECT_LT(enc->d_err, 1e-12L * enc->d) << "z " << z << " h " << h;
      }
    }
  }
}

TEST(PldCellMomentsTest, RejectsBadArguments) {
  EXPECT_FALSE(GaussianCellMomentsForTesting(0, 0.5, kRemove, 0, 1e-3).ok());
  EXPECT_FALSE(GaussianCellMomentsForTesting(1, 0, kRemove, 0, 1e-3).ok());
  EXPECT_FALSE(GaussianCellMomentsForTesting(1, 0.5, kRemove, 1e-3, 0).ok());
}

}  // namespace
}  // namespace dpkit::accounting
