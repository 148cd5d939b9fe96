#include "dpkit/mechanisms/calibration.h"

#include <cmath>

#include <boost/math/distributions/normal.hpp>

#include "gtest/gtest.h"

namespace dpkit::mechanisms {
namespace {

TEST(ClassicGaussianStddevTest, MatchesDworkRothTheoremA1) {
  auto sigma = ClassicGaussianStddev(0.5, 1e-5, 2.0);
  ASSERT_TRUE(sigma.ok());
  const long double expected = 2.0L * std::sqrt(2.0L * std::log(1.25e5L)) / 0.5L;
  EXPECT_NEAR(*sigma, static_cast<double>(expected), 1e-12);
}

TEST(ClassicGaussianStddevTest, RejectsEpsilonOfOneOrMore) {
  auto sigma = ClassicGaussianStddev(1.0, 1e-5, 1.0);
  ASSERT_FALSE(sigma.ok());
  EXPECT_NE(sigma.status().message().find("epsilon must be in (0, 1)"), std::string::npos);
  EXPECT_FALSE(ClassicGaussianStddev(0.5, 0.0, 1.0).ok());
  EXPECT_FALSE(ClassicGaussianStddev(0.5, 1e-5, -1.0).ok());
}

TEST(GdpGaussianStddevTest, IsSensitivityOverMu) {
  EXPECT_DOUBLE_EQ(*GdpGaussianStddev(0.5, 3.0), 6.0);
  EXPECT_FALSE(GdpGaussianStddev(0.0, 1.0).ok());
  EXPECT_DOUBLE_EQ(*GaussianStddevFromNoiseMultiplier(1.1, 2.0), 2.2);
  EXPECT_FALSE(GaussianStddevFromNoiseMultiplier(-1.0, 2.0).ok());
  EXPECT_DOUBLE_EQ(*LaplaceScaleForEpsilon(0.5, 2.0), 4.0);
  EXPECT_FALSE(LaplaceScaleForEpsilon(0.0, 2.0).ok());
}

TEST(NoiseHalfWidthTest, CoversTheNoiseWithTheStatedProbability) {
  // Gaussian 95 %: the published 1.959963984540054 sigma.
  EXPECT_NEAR(*GaussianNoiseHalfWidth(2.0, 0.95), 2.0 * 1.959963984540054, 1e-12);
  const double t = *GaussianNoiseHalfWidth(1.0, 0.999);
  const boost::math::normal_distribution<double> normal;
  EXPECT_NEAR(2 * boost::math::cdf(boost::math::complement(normal, t)), 1e-3, 1e-15);
  // Laplace: P(|X| > t) = exp(-t/b).
  const double tl = *LaplaceNoiseHalfWidth(3.0, 0.9);
  EXPECT_NEAR(std::exp(-tl / 3.0), 0.1, 1e-15);
  EXPECT_FALSE(LaplaceNoiseHalfWidth(3.0, 1.0).ok());
  EXPECT_FALSE(GaussianNoiseHalfWidth(0.0, 0.5).ok());
}

}  // namespace
}  // namespace dpkit::mechanisms
