#include "dpkit/accounting/internal/pld_discrete_gaussian.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

// Brute-force P(X >= k) of N_Z(0, s^2) in long double (|x| up to 60 s: the rest is below
// e^{-1800}).
long double BruteUpper(long double s, long double k) {
  long double z = 0, u = 0;
  const long double reach = std::ceil(60 * s);
  for (long double x = -reach; x <= reach; ++x) {
    const long double f = std::exp(-x * x / (2 * s * s));
    z += f;
    if (x >= k) u += f;
  }
  return u / z;
}

TEST(PldDiscreteGaussianTest, DirectSumsMatchBruteForceWithinTheirErrorBounds) {
  for (long double s : {0.7L, 3.0L, 40.0L}) {
    const DiscreteGaussianTails dg(s);
    for (long double k : {-5.0L, 0.0L, 1.0L, 2.0L, 7.0L}) {
      long double above, below, err;
      dg.Split(k, &above, &below, &err);
      const long double exact = BruteUpper(s, k);
      EXPECT_LE(std::fabs(above - exact), err + 1e-16L * exact) << "s " << (double)s;
      EXPECT_NEAR(static_cast<double>(above + below), 1.0, 1e-15);
    }
  }
}

TEST(PldDiscreteGaussianTest, EulerMaclaurinBranchMatchesBruteForce) {
  const long double s = 600;  // above kDirectSigma = 512
  const DiscreteGaussianTails dg(s);
  for (long double k : {1.0L, 300.0L, 1800.0L}) {
    long double above, below, err;
    dg.Split(k, &above, &below, &err);
    EXPECT_NEAR(static_cast<double>(above / BruteUpper(s, k)), 1.0, 1e-12);
    EXPECT_GT(err, 0);
  }
  EXPECT_LE(dg.PmfLower(10), dg.PmfUpper(10));
}

TEST(PldDiscreteGaussianTest, ExactSumSignSeesThroughCancellation) {
  EXPECT_EQ(ExactSumSign({1e30L, 1.0L, -1e30L}), 1);
  EXPECT_EQ(ExactSumSign({1e30L, -1.0L, -1e30L}), -1);
  EXPECT_EQ(ExactSumSign({0.1L, 0.2L, -0.1L, -0.2L}), 0);
  EXPECT_EQ(ExactSumSign({}), 0);
}

TEST(PldDiscreteGaussianTest, LatticeTailsPlaceAnAtomOnTheThresholdExactly) {
  // D = 2, s = 1: losses (x - 1) * 2, so ell = 0 at x = 1. P(ell > 0) = P(X >= 2),
  // P(ell >= 0) = P(X >= 1) (inclusive).
  const DiscreteGaussianTails dg(1);
  const BaseTails strict = DiscreteGaussianBaseTails(dg, 1, 2, 0, 0, Threshold::kAbove);
  const BaseTails incl = DiscreteGaussianBaseTails(dg, 1, 2, 0, 0, Threshold::kAtOrAbove);
  EXPECT_NEAR(static_cast<double>(strict.a_above), static_cast<double>(BruteUpper(1, 2)), 1e-15);
  EXPECT_NEAR(static_cast<double>(incl.a_above), static_cast<double>(BruteUpper(1, 1)), 1e-15);
  EXPECT_EQ(strict.atoms, 2);
  EXPECT_EQ(DiscreteLossSign(1, 2, 1, 0), 0);
  EXPECT_EQ(DiscreteLossSign(2, 2, 1, 0), 1);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
