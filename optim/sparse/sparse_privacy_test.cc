#include "optim/sparse/sparse_privacy.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::optim::sparse {
namespace {

// delta(eps) of N(0, z^2) vs N(1, z^2) by direct numerical integration of the hockey
// stick divergence int max(0, p(x) - e^eps q(x)) dx (Simpson's rule in long double on
// [-40 z, 1 + 40 z], 400001 points); independent of the closed form of Balle & Wang.
long double HockeyStickDelta(double z, double eps) {
  const long double lo = -40.0L * z, hi = 1.0L + 40.0L * z;
  const int n = 400000;
  const long double h = (hi - lo) / n;
  const long double pi = 3.141592653589793238462643383279L;
  auto f = [&](long double x) {
    const long double p = std::exp(-(x - 1) * (x - 1) / (2.0L * z * z)) / (z * std::sqrt(2 * pi));
    const long double q = std::exp(-x * x / (2.0L * z * z)) / (z * std::sqrt(2 * pi));
    const long double v = p - std::exp(static_cast<long double>(eps)) * q;
    return v > 0 ? v : 0.0L;
  };
  long double sum = f(lo) + f(hi);
  for (int i = 1; i < n; ++i) sum += (i % 2 ? 4 : 2) * f(lo + i * h);
  return sum * h / 3;
}

TEST(AnalyticGaussianEpsilonTest, MatchesNumericalHockeyStickDivergence) {
  for (double z : {0.8, 1.0, 2.0}) {
    for (double delta : {1e-3, 1e-5}) {
      auto eps = AnalyticGaussianEpsilon(z, delta);
      ASSERT_TRUE(eps.ok());
      // At eps the divergence is delta; slightly below eps it exceeds delta. The
      // quadrature's relative error (~1e-9: the integrand's kink at the crossing
      // point limits Simpson to O(h^2)) is below the 1e-6 margins used here.
      EXPECT_LE(HockeyStickDelta(z, *eps), delta * (1 + 1e-6)) << z << " " << delta;
      EXPECT_GT(HockeyStickDelta(z, *eps * (1 - 1e-4)), delta * (1 + 1e-6)) << z;
    }
  }
}

TEST(AnalyticGaussianEpsilonTest, IsZeroWhenNoiseIsHuge) {
  // delta(0) = 2 Phi(1/(2z)) - 1 ~ 0.004 for z = 100 < 0.01.
  auto eps = AnalyticGaussianEpsilon(100.0, 0.01);
  ASSERT_TRUE(eps.ok());
  EXPECT_EQ(*eps, 0.0);
}

// Exact RDP of the Poisson subsampled Gaussian at integer order a (Mironov, Talwar,
// Zhang 2019, Sec. 3.3): log(sum_k C(a,k) (1-q)^(a-k) q^k exp((k^2 - k) / (2 z^2))) / (a-1).
long double ExactSubsampledGaussianRdp(double q, double z, int a) {
  long double sum = 0;
  for (int k = 0; k <= a; ++k) {
    const long double log_binom = std::lgamma(a + 1.0L) - std::lgamma(k + 1.0L) -
                                  std::lgamma(a - k + 1.0L);
    sum += std::exp(log_binom + (a - k) * std::log1p(-static_cast<long double>(q)) +
                    k * std::log(static_cast<long double>(q)) + (k * k - k) / (2.0L * z * z));
  }
  return std::log(sum) / (a - 1);
}

TEST(PoissonSubsampledRdpUpperBoundTest, IsAtLeastTheExactSubsampledGaussianRdp) {
  for (double q : {0.001, 0.01, 0.1, 0.5}) {
    for (double z : {0.7, 1.0, 2.0}) {
      std::vector<double> inner(65);
      for (int l = 2; l <= 64; ++l) inner[l] = l / (2 * z * z);
      for (int a : {2, 3, 8, 32, 64}) {
        const double bound = PoissonSubsampledRdpUpperBound(q, inner, a);
        const long double exact = ExactSubsampledGaussianRdp(q, z, a);
        EXPECT_GE(bound, static_cast<double>(exact) * (1 - 1e-12)) << q << " " << z << " " << a;
        // Zhu & Wang's bound is within a small factor for small q (the constant 3).
        if (q <= 0.01 && a <= 8) {
          EXPECT_LE(bound, 3 * exact + 1e-12) << q << " " << z << " " << a;
        }
      }
    }
  }
}

TEST(PoissonSubsampledRdpUpperBoundTest, WithoutSamplingIsInnerPlusLogThreeTerm) {
  std::vector<double> inner(11);
  for (int l = 2; l <= 10; ++l) inner[l] = 0.3 * l;
  EXPECT_NEAR(PoissonSubsampledRdpUpperBound(1.0, inner, 10), 3.0 + std::log(3.0) / 9, 1e-12);
}

SparseDpSgdPrivacyParams PaperLikeParams() {
  SparseDpSgdPrivacyParams p;
  p.sampling_rate = 0.005;
  p.noise_multiplier = 1.0;
  p.selection_epsilon_per_pick = 0.01;
  p.selection_picks = 10;
  p.selection_bounded_range = true;
  p.steps = 5000;
  return p;
}

TEST(SparsePrivacyTest, RdpBoundIsTighterThanStrongComposition) {
  auto strong = StrongCompositionEpsilon(PaperLikeParams(), 1e-5);
  auto rdp = RdpEpsilon(PaperLikeParams(), 1e-5);
  ASSERT_TRUE(strong.ok());
  ASSERT_TRUE(rdp.ok());
  EXPECT_GT(*rdp, 0);
  EXPECT_LT(*rdp, *strong);
}

TEST(SparsePrivacyTest, SelectionCostIncreasesEpsilon) {
  SparseDpSgdPrivacyParams p = PaperLikeParams();
  p.selection_epsilon_per_pick = 0;
  auto rdp_gaussian_only = RdpEpsilon(p, 1e-5);
  auto strong_gaussian_only = StrongCompositionEpsilon(p, 1e-5);
  ASSERT_TRUE(rdp_gaussian_only.ok() && strong_gaussian_only.ok());
  EXPECT_LT(*rdp_gaussian_only, *RdpEpsilon(PaperLikeParams(), 1e-5));
  EXPECT_LT(*strong_gaussian_only, *StrongCompositionEpsilon(PaperLikeParams(), 1e-5));
}

TEST(SparsePrivacyTest, BoundedRangeIsNeverLooserThanPureDp) {
  SparseDpSgdPrivacyParams p = PaperLikeParams();
  p.selection_bounded_range = false;
  EXPECT_LE(*RdpEpsilon(PaperLikeParams(), 1e-5), *RdpEpsilon(p, 1e-5));
}

TEST(SparsePrivacyTest, SingleUnsampledStepIsTheGaussianPlusSelection) {
  // T = 1, q = 1: basic composition is below advanced; the per-step delta is delta/2.
  SparseDpSgdPrivacyParams p;
  p.sampling_rate = 1.0;
  p.noise_multiplier = 2.0;
  p.selection_epsilon_per_pick = 0.25;
  p.selection_picks = 2;
  p.steps = 1;
  auto eps = StrongCompositionEpsilon(p, 1e-4);
  ASSERT_TRUE(eps.ok());
  EXPECT_NEAR(*eps, 0.5 + *AnalyticGaussianEpsilon(2.0, 0.5e-4), 1e-12);
}

TEST(SparsePrivacyTest, RejectsBadParameters) {
  SparseDpSgdPrivacyParams p = PaperLikeParams();
  EXPECT_FALSE(RdpEpsilon(p, 0).ok());
  EXPECT_FALSE(StrongCompositionEpsilon(p, 1).ok());
  p.steps = 0;
  EXPECT_FALSE(RdpEpsilon(p, 1e-5).ok());
  p = PaperLikeParams();
  p.sampling_rate = 0;
  EXPECT_FALSE(StrongCompositionEpsilon(p, 1e-5).ok());
  EXPECT_FALSE(AnalyticGaussianEpsilon(-1, 1e-5).ok());
}

}  // namespace
}  // namespace dpkit::optim::sparse
