#include "dpkit/accounting/gdp.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "boost/math/quadrature/gauss_kronrod.hpp"
#include "gtest/gtest.h"

namespace dpkit::accounting {
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

TEST(AnalyticGaussianStddevTest, IsTheSmallestSigmaMeetingDeltaByQuadrature) {
  for (double epsilon : {0.1, 0.5, 1.0, 3.0, 8.0}) {
    for (double delta : {1e-3, 1e-6, 1e-10}) {
      auto sigma = AnalyticGaussianStddev(epsilon, delta, 1.5);
      ASSERT_TRUE(sigma.ok()) << sigma.error();
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
  // Classic: sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon (Dwork & Roth 2014, Thm. A.1).
  for (double epsilon : {0.1, 0.5, 0.9}) {
    EXPECT_LT(*AnalyticGaussianStddev(epsilon, 1e-5, 1.0),
              std::sqrt(2.0 * std::log(1.25e5)) / epsilon);
  }
  EXPECT_FALSE(AnalyticGaussianStddev(0.0, 1e-5, 1.0).ok());
  EXPECT_FALSE(AnalyticGaussianStddev(1.0, 1e-5, -1.0).ok());
}


// Hockey-stick divergence E_{e^eps}(N(mu,1) || N(0,1)) = int (p(x) - e^eps q(x))_+ dx
// by composite Simpson in long double, straight from the definition and independent
// of the closed form (3.2). p/q = exp(mu x - mu^2/2) >= e^eps exactly for
// x >= x0 = eps/mu + mu/2, so the integrand is p(x) (1 - e^{-mu (x - x0)}) on
// [x0, inf). The step is 1/400 of the smallest length scale of the integrand
// (1, 1/mu, 1/(x0 - mu)), so Simpson's relative error is about (1/400)^4 ~ 4e-11.
long double HockeyStickBySimpson(long double mu, long double epsilon) {
  const long double x0 = epsilon / mu + mu / 2;
  long double scale = 1.0L;
  if (mu > 1) scale = std::min(scale, 1.0L / mu);
  if (x0 - mu > 1) scale = std::min(scale, 1.0L / (x0 - mu));
  const long double h_target = scale / 400;
  const long double length = std::max(0.0L, mu - x0) + 45.0L;
  int64_t n = static_cast<int64_t>(std::ceil(length / h_target));
  if (n % 2 == 1) ++n;
  const long double h = length / n;
  const long double norm = 1.0L / std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
  auto integrand = [&](long double u) {
    const long double x = x0 + u;
    return norm * std::exp(-0.5L * (x - mu) * (x - mu)) * -std::expm1(-mu * u);
  };
  long double sum = integrand(0) + integrand(length);
  for (int64_t i = 1; i < n; ++i) sum += (i % 2 == 1 ? 4 : 2) * integrand(i * h);
  return sum * h / 3;
}

TEST(GdpDeltaTest, MatchesNumericalIntegrationOfTheHockeyStickDivergence) {
  for (double mu : {1e-4, 0.01, 0.3, 1.0, 2.0, 5.0, 20.0, 50.0}) {
    for (double multiple : {0.0, 0.1, 1.0, 3.0}) {
      // epsilon from 0 up to a point deep in the tail (delta down to ~1e-15 and below).
      const double epsilon = multiple * mu * (mu / 2 + 2.5);
      Result<double> delta = GdpDelta(mu, epsilon);
      ASSERT_TRUE(delta.ok()) << delta.error();
      const double reference = static_cast<double>(HockeyStickBySimpson(mu, epsilon));
      // Simpson is accurate to ~1e-10 relative (see above); the closed form to ~1e-13.
      EXPECT_NEAR(*delta, reference, 1e-9 * reference)
          << "mu = " << mu << ", epsilon = " << epsilon;
    }
  }
}

// Reference values of eq. (3.2) evaluated with mpmath at 60 significant digits
// (python: ncdf(-e/m + m/2) - exp(e) * ncdf(-e/m - m/2), mp.dps = 60).
struct HighPrecisionCase {
  double mu;
  double epsilon;
  double delta;
};

TEST(GdpDeltaTest, AgreesWithHighPrecisionValuesAcrossTheRange) {
  const std::vector<HighPrecisionCase> cases = {
      {0.0001, 0.001, 7.4782984600195642407e-29},
      {0.0001, 0.0, 0.000039894228023520674695},
      {0.01, 0.05, 5.4814402007468725614e-10},
      {0.5, 3.0, 3.4009117356735288242e-10},
      {1.0, 1.0, 0.1269367375066439458},
      {2.0, 10.0, 9.9402028161181527684e-6},
      {5.0, 40.0, 8.823257920004711109e-9},
      {20.0, 300.0, 2.2727748823194893649e-7},
      {50.0, 1500.0, 2.596292350824537943e-7},
      {50.0, 3000.0, 6.6139881001728465622e-269},
      {50.0, 0.0, 1.0},
      {3.0, 0.5, 0.82999580994769030778},
      // Below the documented mu range (tiny sampling rates reach it from the CLI).
      {1e-08, 8e-08, 7.5502627139570014981e-25},
      {1e-12, 5e-12, 5.3461655338461860491e-20},
      {0.001, 0.005, 5.3595470410572127902e-11},
      {1e-06, 1e-07, 3.5093534875146525321e-7},
      {1e-20, 6e-20, 1.5635697959709574355e-30},
      {0.002, 0.02, 1.5099354259732599313e-27},
  };
  for (const HighPrecisionCase& c : cases) {
    Result<double> delta = GdpDelta(c.mu, c.epsilon);
    ASSERT_TRUE(delta.ok()) << delta.error();
    // 1e-12 relative: the worst case (mu = 1e-3, direct difference of two Mills
    // ratios) loses ~4 of long double's 19 digits to cancellation.
    EXPECT_NEAR(*delta, c.delta, 1e-12 * c.delta)
        << "mu = " << c.mu << ", epsilon = " << c.epsilon;
  }
}

TEST(GdpDeltaTest, NeverOverflowsAtHugeEpsilon) {
  // e^eps alone overflows a double here; the log-space form must not.
  Result<double> log_delta = GdpLogDelta(50.0, 1e5);
  ASSERT_TRUE(log_delta.ok());
  EXPECT_TRUE(std::isfinite(*log_delta));
  EXPECT_LT(*log_delta, -1e5);
  Result<double> delta = GdpDelta(50.0, 1e5);
  ASSERT_TRUE(delta.ok());
  EXPECT_EQ(*delta, 0.0);  // truly below the smallest double, not NaN
}

TEST(GdpDeltaTest, IsDecreasingInEpsilonAndIncreasingInMu) {
  double previous = 2.0;
  for (double epsilon = 0; epsilon <= 30; epsilon += 0.25) {
    const double delta = *GdpDelta(4.0, epsilon);
    EXPECT_LT(delta, previous);
    previous = delta;
  }
  previous = 0.0;
  for (double mu = 0.1; mu <= 10; mu += 0.1) {
    const double delta = *GdpDelta(mu, 2.0);
    EXPECT_GT(delta, previous);
    previous = delta;
  }
}

TEST(GdpDeltaTest, RejectsInvalidArguments) {
  EXPECT_FALSE(GdpDelta(0.0, 1.0).ok());
  EXPECT_FALSE(GdpDelta(-1.0, 1.0).ok());
  EXPECT_FALSE(GdpDelta(NAN, 1.0).ok());
  EXPECT_FALSE(GdpDelta(INFINITY, 1.0).ok());
  EXPECT_FALSE(GdpDelta(1.0, -0.5).ok());
  EXPECT_FALSE(GdpDelta(1.0, INFINITY).ok());
  EXPECT_EQ(GdpDelta(-1.0, 1.0).error(), "mu must be finite and > 0, got -1");
}

TEST(GdpEpsilonTest, InvertsDeltaOverTheWholeRange) {
  const std::vector<double> deltas = {1e-15, 1e-12, 1e-10, 1e-7, 1e-5,
                                      1e-3,  0.01,  0.1,   0.3,  0.6};
  for (double log_mu = std::log(1e-4); log_mu <= std::log(50.0) + 1e-9;
       log_mu += (std::log(50.0) - std::log(1e-4)) / 40) {
    const double mu = std::exp(log_mu);
    for (double delta : deltas) {
      Result<double> epsilon = GdpEpsilon(mu, delta);
      ASSERT_TRUE(epsilon.ok()) << epsilon.error();
      ASSERT_TRUE(std::isfinite(*epsilon));
      const double delta_at_zero = std::erf(mu / (2 * std::sqrt(2.0)));
      if (delta >= delta_at_zero) {
        EXPECT_EQ(*epsilon, 0.0);
        continue;
      }
      ASSERT_GT(*epsilon, 0.0);
      const double achieved = *GdpDelta(mu, *epsilon);
      // Safe side: the returned epsilon meets delta (1e-12: last-bit rounding of
      // the final exp); and tight: within 1e-6 relative of delta.
      EXPECT_LE(achieved, delta * (1 + 1e-12)) << "mu = " << mu << " delta = " << delta;
      EXPECT_GE(achieved, delta * (1 - 1e-6)) << "mu = " << mu << " delta = " << delta;
      // Round trip through the mu inversion (eq. 3.3).
      Result<double> mu_back = GdpMu(*epsilon, delta);
      ASSERT_TRUE(mu_back.ok()) << mu_back.error();
      EXPECT_NEAR(*mu_back, mu, 1e-6 * mu) << "epsilon = " << *epsilon;
    }
  }
}

TEST(GdpEpsilonTest, StaysOnTheSafeSideBelowTheDocumentedMuRange) {
  for (double mu : {1e-12, 1e-8, 1e-6}) {
    for (double delta : {1e-15, 1e-13}) {
      Result<double> epsilon = GdpEpsilon(mu, delta);
      ASSERT_TRUE(epsilon.ok()) << epsilon.error();
      ASSERT_GT(*epsilon, 0.0);
      const double achieved = *GdpDelta(mu, *epsilon);
      EXPECT_LE(achieved, delta * (1 + 1e-12)) << "mu = " << mu;
      EXPECT_GE(achieved, delta * (1 - 1e-6)) << "mu = " << mu;
    }
  }
}

TEST(GdpEpsilonTest, HandlesLargeEpsilonWithoutAFixedBracket) {
  // eps ~ 1650 here: e^eps overflows a double.
  Result<double> epsilon = GdpEpsilon(50.0, 1e-15);
  ASSERT_TRUE(epsilon.ok()) << epsilon.error();
  EXPECT_GT(*epsilon, 1000.0);
  EXPECT_NEAR(*GdpDelta(50.0, *epsilon), 1e-15, 1e-21);
  // Far beyond the documented range it still works.
  epsilon = GdpEpsilon(500.0, 1e-300);
  ASSERT_TRUE(epsilon.ok()) << epsilon.error();
  EXPECT_NEAR(*GdpLogDelta(500.0, *epsilon), std::log(1e-300), 1e-6);
}

TEST(GdpEpsilonTest, RejectsDeltaOutsideOpenUnitInterval) {
  EXPECT_FALSE(GdpEpsilon(1.0, 0.0).ok());
  EXPECT_FALSE(GdpEpsilon(1.0, 1.0).ok());
  EXPECT_FALSE(GdpEpsilon(1.0, NAN).ok());
  EXPECT_FALSE(GdpEpsilon(0.0, 1e-5).ok());
  EXPECT_EQ(GdpEpsilon(1.0, 2.0).error(), "delta must be in (0, 1), got 2");
}

TEST(GdpMuTest, AtZeroEpsilonIsTheClosedForm) {
  // delta(0; mu) = 2 Phi(mu/2) - 1 = erf(mu / (2 sqrt 2)).
  Result<double> mu = GdpMu(0.0, 0.5);
  ASSERT_TRUE(mu.ok());
  EXPECT_NEAR(std::erf(*mu / (2 * std::sqrt(2.0))), 0.5, 1e-15);
}

TEST(GaussianTradeoffTest, ZeroMuIsRandomGuessing) {
  for (double alpha = 0; alpha <= 1; alpha += 0.05) {
    EXPECT_NEAR(GaussianTradeoff(0.0, alpha), 1 - alpha, 1e-15);
  }
}

TEST(GaussianTradeoffTest, IsSymmetric) {
  // G_mu is symmetric (Dong, Roth, Su 2019, Sec. 2): G_mu(G_mu(alpha)) = alpha.
  for (double mu : {0.5, 1.0, 3.0}) {
    for (double alpha = 0.01; alpha < 1; alpha += 0.07) {
      EXPECT_NEAR(GaussianTradeoff(mu, GaussianTradeoff(mu, alpha)), alpha, 1e-12);
    }
  }
}

TEST(GaussianTradeoffTest, ItsSupportingLinesGiveTheGdpDelta) {
  // (eps, delta)-DP holds iff f >= f_{eps,delta}; the least delta is
  // sup_alpha (1 - G_mu(alpha) - e^eps alpha) (the primal-dual relation of
  // Dong, Roth, Su 2019, Sec. 2).
  // Maximise over a fine alpha grid (log-spaced, 20000 points per decade from
  // 1e-12): the supremum is smooth, so the grid error is ~(grid step)^2 ~ 1e-8.
  for (double mu : {0.5, 1.0, 2.0}) {
    for (double epsilon : {0.0, 0.5, 1.5, 3.0}) {
      double best = 0;
      for (double log_alpha = std::log(1e-12); log_alpha <= 0; log_alpha += 1.2e-4) {
        const double alpha = std::exp(log_alpha);
        best = std::max(best, 1 - GaussianTradeoff(mu, alpha) - std::exp(epsilon) * alpha);
      }
      const double delta = *GdpDelta(mu, epsilon);
      EXPECT_NEAR(best, delta, 1e-6 * delta) << "mu = " << mu << " eps = " << epsilon;
      // And G_mu lies above f_{eps, delta(eps)} everywhere on a grid.
      for (double alpha = 0; alpha <= 1; alpha += 0.001) {
        EXPECT_GE(GaussianTradeoff(mu, alpha) + 1e-12, ApproxDpTradeoff(epsilon, delta, alpha));
      }
    }
  }
}

TEST(ApproxDpTradeoffTest, MatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(ApproxDpTradeoff(0.0, 0.0, 0.3), 0.7);
  // eps = ln 2, delta = 0.1: branches 1 - 0.1 - 2 alpha and (0.9 - alpha) / 2.
  EXPECT_DOUBLE_EQ(ApproxDpTradeoff(std::log(2.0), 0.1, 0.2), 0.5);
  EXPECT_DOUBLE_EQ(ApproxDpTradeoff(std::log(2.0), 0.1, 0.5), 0.2);
  EXPECT_DOUBLE_EQ(ApproxDpTradeoff(std::log(2.0), 0.1, 0.95), 0.0);
  EXPECT_DOUBLE_EQ(ApproxDpTradeoff(1000.0, 0.0, 0.0), 1.0);
  EXPECT_TRUE(std::isnan(ApproxDpTradeoff(-1.0, 0.0, 0.5)));
  EXPECT_TRUE(std::isnan(GaussianTradeoff(1.0, 1.5)));
}

TEST(CltMuTest, MatchesEquationThreeOneByHand) {
  // p = 1, sigma = 1, T = 1: sqrt(e - 1).
  EXPECT_NEAR(*CltMu(1.0, 1.0, 1), std::sqrt(std::exp(1.0) - 1), 1e-15);
  // p = 0.01, sigma = 2, T = 400: 0.01 * sqrt(400 (e^{1/4} - 1)) = 0.2 sqrt(e^0.25 - 1).
  EXPECT_NEAR(*CltMu(0.01, 2.0, 400), 0.2 * std::sqrt(std::expm1(0.25)), 1e-15);
}

TEST(CltMuTest, ReproducesBuEtAlTable1ToTwoDecimals) {
  // Bu et al. 2020, Table 1: MNIST, p = 256/60000, delta = 1e-5,
  // T = ceil(epochs * 60000 / 256); paper's mu and eps_CLT printed to 2 decimals.
  struct Row {
    double sigma, epochs, mu, epsilon;
  };
  const std::vector<Row> rows = {{1.3, 15, 0.23, 0.83},  {1.1, 60, 0.57, 2.32},
                                 {0.7, 45, 1.13, 5.07},  {0.6, 62, 2.00, 9.98},
                                 {0.55, 68, 2.76, 14.98}, {0.5, 100, 4.78, 31.12}};
  for (const Row& row : rows) {
    const int64_t steps = static_cast<int64_t>(std::ceil(row.epochs * 60000 / 256));
    Result<double> mu = CltMu(256.0 / 60000, row.sigma, steps);
    ASSERT_TRUE(mu.ok());
    EXPECT_NEAR(*mu, row.mu, 0.005) << "sigma = " << row.sigma;
    Result<double> epsilon = GdpEpsilon(*mu, 1e-5);
    ASSERT_TRUE(epsilon.ok());
    EXPECT_NEAR(*epsilon, row.epsilon, 0.005) << "sigma = " << row.sigma;
  }
}

TEST(CltMuTest, RejectsInvalidArgumentsAndOverflow) {
  EXPECT_FALSE(CltMu(0.0, 1.0, 10).ok());
  EXPECT_FALSE(CltMu(1.5, 1.0, 10).ok());
  EXPECT_FALSE(CltMu(0.1, 0.0, 10).ok());
  EXPECT_FALSE(CltMu(0.1, NAN, 10).ok());
  EXPECT_FALSE(CltMu(0.1, 1.0, 0).ok());
  EXPECT_FALSE(CltMu(0.1, 0.01, 10).ok());  // e^{10^4} overflows
  EXPECT_TRUE(CltMu(0.1, 0.05, 10).ok());
}

TEST(CltNoiseMultiplierTest, SolvesTheReverseProblem) {
  for (double epsilon : {0.5, 2.0, 8.0}) {
    Result<double> sigma = CltNoiseMultiplier(epsilon, 1e-5, 256.0 / 60000, 10000);
    ASSERT_TRUE(sigma.ok()) << sigma.error();
    const double mu = *CltMu(256.0 / 60000, *sigma, 10000);
    EXPECT_NEAR(*GdpEpsilon(mu, 1e-5), epsilon, 1e-6 * epsilon);
  }
  EXPECT_FALSE(CltNoiseMultiplier(1.0, 0.0, 0.01, 100).ok());
  EXPECT_FALSE(CltNoiseMultiplier(1.0, 1e-5, 0.0, 100).ok());
}

}  // namespace
}  // namespace dpkit::accounting
