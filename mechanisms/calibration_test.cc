#include "mechanisms/calibration.h"

#include <cmath>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/quadrature/gauss_kronrod.hpp>

#include "gtest/gtest.h"

namespace dpkit::mechanisms {
namespace {

// Hockey-stick divergence of N(0, s^2) from N(Delta, s^2) at e^eps, by numerical
// integration of max(0, p(x) - e^eps q(x)) (independent of the closed form used by
// the code): the positive part is x < x* = Delta/2 - eps s^2 / Delta.
double GaussianDeltaByQuadrature(double sigma, double epsilon, double sensitivity) {
  const double x_star = sensitivity / 2 - epsilon * sigma * sigma / sensitivity;
  auto integrand = [&](double x) {
    const double p = std::exp(-x * x / (2 * sigma * sigma));
    const double q = std::exp(-(x - sensitivity) * (x - sensitivity) / (2 * sigma * sigma) + epsilon);
    return (p - q) / (sigma * std::sqrt(2 * M_PI));
  };
  return boost::math::quadrature::gauss_kronrod<double, 61>::integrate(
      integrand, x_star - 40 * sigma, x_star, 15, 1e-13);
}

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

TEST(AnalyticGaussianStddevTest, IsTheSmallestSigmaMeetingDeltaByQuadrature) {
  for (double epsilon : {0.1, 0.5, 1.0, 3.0, 8.0}) {
    for (double delta : {1e-3, 1e-6, 1e-10}) {
      auto sigma = AnalyticGaussianStddev(epsilon, delta, 1.5);
      ASSERT_TRUE(sigma.ok()) << sigma.status();
      // Meets delta (quadrature relative accuracy ~1e-10; allow 1e-6 relative).
      EXPECT_LE(GaussianDeltaByQuadrature(*sigma, epsilon, 1.5), delta * (1 + 1e-6))
          << "eps " << epsilon << " delta " << delta;
      // Minimal: 0.1 % less noise violates delta.
      EXPECT_GT(GaussianDeltaByQuadrature(*sigma * 0.999, epsilon, 1.5), delta)
          << "eps " << epsilon << " delta " << delta;
    }
  }
}

TEST(AnalyticGaussianStddevTest, NeedsLessNoiseThanTheClassicMechanism) {
  for (double epsilon : {0.1, 0.5, 0.9}) {
    EXPECT_LT(*AnalyticGaussianStddev(epsilon, 1e-5, 1.0), *ClassicGaussianStddev(epsilon, 1e-5, 1.0));
  }
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
