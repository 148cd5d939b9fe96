#include "accounting/pld.h"

#include <cmath>
#include <vector>

#include "accounting/event.h"
#include "boost/math/quadrature/gauss_kronrod.hpp"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

// 1 - Phi(x) in long double (glibc erfcl: full relative precision in the upper tail).
long double PhiUpper(long double x) { return 0.5L * std::erfc(x / std::sqrt(2.0L)); }

// delta(eps; mu) of mu-GDP, Dong, Roth, Su 2019 Cor. 2.13 (= Bu et al. eq. 3.2), written
// here independently of //accounting:gdp: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
long double GaussianDelta(long double mu, long double eps) {
  return PhiUpper(eps / mu - mu / 2) - std::exp(eps) * PhiUpper(eps / mu + mu / 2);
}
long double GaussianEpsilon(long double mu, long double delta) {
  long double lo = 0, hi = 1;
  while (GaussianDelta(mu, hi) > delta) hi *= 2;
  for (int i = 0; i < 200; ++i) {
    const long double mid = (lo + hi) / 2;
    (GaussianDelta(mu, mid) > delta ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

Event Gaussian(double sigma) { return *Event::Gaussian(sigma); }

// q = 1: T-fold composition of the Gaussian mechanism is exactly mu-GDP with
// mu = sqrt(T)/sigma. The bounds must bracket the closed form, and the certified upper
// bound must be within the default tolerance (1e-4 relative in eps) plus a margin: we
// require 0.1% (the general accuracy target for the upper bound).
TEST(PldTest, ComposedGaussianMatchesClosedFormEpsilon) {
  struct Case { double sigma; int64_t steps; double delta; };
  for (const Case& c : {Case{1.0, 1, 1e-5}, Case{5.0, 10, 1e-5}, Case{20.0, 1000, 1e-3},
                        Case{0.5, 3, 1e-12}, Case{2.0, 100, 1e-15}}) {
    const Event event = *Event::SelfComposed(Gaussian(c.sigma), c.steps);
    const double mu = std::sqrt(static_cast<double>(c.steps)) / c.sigma;
    const double exact = static_cast<double>(GaussianEpsilon(mu, c.delta));
    auto bounds = PldEpsilon(event, c.delta);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, exact * (1 + 1e-12)) << c.sigma << " " << c.steps;
    EXPECT_GE(bounds->epsilon_upper, exact * (1 - 1e-12)) << c.sigma << " " << c.steps;
    EXPECT_LE(bounds->epsilon_upper, exact * 1.001) << c.sigma << " " << c.steps;
    EXPECT_GE(bounds->epsilon_lower, exact * 0.995) << c.sigma << " " << c.steps;
  }
}

TEST(PldTest, ComposedGaussianMatchesClosedFormDelta) {
  for (double eps : {0.0, 0.5, 2.0, 8.0}) {
    const Event event = *Event::SelfComposed(Gaussian(3.0), 50);
    const long double exact = GaussianDelta(std::sqrt(50.0L) / 3, eps);
    auto bounds = PldDelta(event, eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-12L)) << eps;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-12L)) << eps;
    // Relative accuracy of delta: 1% (a 1e-4 relative eps tolerance moves delta by
    // about eps * |d log delta / d eps| * 1e-4, well below 1% here).
    EXPECT_LE(bounds->delta_upper, exact * 1.01) << eps;
  }
}

// T = 1: the hockey-stick divergence of the Poisson-subsampled Gaussian by numerical
// integration (Gauss-Kronrod on the region where the integrand is positive), for both
// directions, compared with the PLD bounds.
long double SubsampledGaussianDeltaByQuadrature(double q, double sigma, double eps) {
  auto density = [sigma](long double o, long double mean) {
    const long double z = (o - mean) / sigma;
    return std::exp(-z * z / 2) / (sigma * std::sqrt(2 * static_cast<long double>(M_PI)));
  };
  const long double e = std::exp(static_cast<long double>(eps));
  // Remove: P = (1-q) N(0) + q N(1), Q = N(0); integrand positive for o > o1.
  auto remove = [&](long double o) {
    return std::max<long double>(
        (1 - q) * density(o, 0) + q * density(o, 1) - e * density(o, 0), 0);
  };
  // Add: P = N(0), Q = (1-q) N(0) + q N(1); integrand positive for o < o2.
  auto add = [&](long double o) {
    return std::max<long double>(
        density(o, 0) - e * ((1 - q) * density(o, 0) + q * density(o, 1)), 0);
  };
  using Integrator = boost::math::quadrature::gauss_kronrod<long double, 61>;
  // Kinks: remove where q(e^{l(o)} - 1) = e - 1, l(o) = (2o-1)/(2 sigma^2).
  const long double o1 = sigma * sigma * std::log1p((e - 1) / q) + 0.5L;
  long double remove_value = 0, add_value = 0;
  for (long double a = o1; a < o1 + 40 * sigma; a += sigma) {
    remove_value += Integrator::integrate(remove, a, a + sigma, 15, 1e-16L);
  }
  // Add: 1 >= e (1 - q + q e^{l}) <=> e^l <= (1/e - 1 + q)/q; empty if 1/e <= 1 - q.
  const long double v = (1 / e - 1 + q) / q;
  if (v > 0) {
    const long double o2 = sigma * sigma * std::log(v) + 0.5L;
    for (long double b = o2; b > o2 - 40 * sigma; b -= sigma) {
      add_value += Integrator::integrate(add, b - sigma, b, 15, 1e-16L);
    }
  }
  return std::max(remove_value, add_value);
}

TEST(PldTest, SingleSubsampledGaussianMatchesQuadrature) {
  struct Case { double q, sigma, eps; };
  for (const Case& c : {Case{0.01, 1.0, 0.01}, Case{0.1, 0.8, 0.5}, Case{0.5, 2.0, 0.1},
                        Case{0.001, 0.6, 1.0}, Case{0.3, 1.5, 0.0}}) {
    const Event event = *Event::PoissonSampled(c.q, Gaussian(c.sigma));
    const long double exact = SubsampledGaussianDeltaByQuadrature(c.q, c.sigma, c.eps);
    PldOptions options;
    options.epsilon_tolerance = 1e-5;
    auto bounds = PldDelta(event, c.eps, options);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    // Quadrature is accurate to ~1e-15 relative; allow 1e-10 relative for it.
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-10L)) << c.q << " " << c.sigma;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-10L)) << c.q << " " << c.sigma;
    EXPECT_LE(bounds->delta_upper, exact * 1.001L + 1e-15L) << c.q << " " << c.sigma;
    EXPECT_GE(bounds->delta_lower, exact * 0.99L) << c.q << " " << c.sigma;
  }
}

// Google dp_accounting's published examples (privacy_loss_distribution tests and
// documentation), printed to the digits shown; the bounds must bracket them up to that
// rounding.
TEST(PldTest, MatchesGooglePublishedGaussianComposition) {
  const Event event = *Event::SelfComposed(Gaussian(std::sqrt(3.0)), 3);
  auto bounds = PldDelta(event, 1.0);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->delta_lower, 0.126936 + 5e-7);
  EXPECT_GE(bounds->delta_upper, 0.126936 - 5e-7);
  EXPECT_NEAR(bounds->delta_upper, 0.126936, 1e-5);
}

// Google's published value for this case is its own PESSIMISTIC estimate (an upper
// bound with its default grid), not the exact value, so it must lie above dpkit's
// certified lower bound and close to dpkit's certified upper bound (within 2e-5 absolute:
// dpkit's bound is 0.155933, the published one 0.15594 rounded to 5 digits).
TEST(PldTest, MatchesGooglePublishedPoissonSampledGaussian) {
  const Event event =
      *Event::SelfComposed(*Event::PoissonSampled(0.2, Gaussian(0.5)), 3);
  auto bounds = PldDelta(event, 1.0);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->delta_lower, 0.15594 + 5e-6);
  EXPECT_NEAR(bounds->delta_upper, 0.15594, 2e-5);
}

// Bu et al. 2020, Table 1 row sigma = 1.1, 60 epochs (q = 256/60000, T = 14063,
// delta = 1e-5): exact eps ~ 2.3816 (to the 4 decimals quoted in the issue, i.e.
// +-5e-5). Targets: upper within 0.02 %, lower within 0.2 %.
TEST(PldTest, TableOneRowIsTightOnBothSides) {
  const Event event = *DpSgdEvent(256.0 / 60000, 1.1, 14063);
  auto bounds = PldEpsilon(event, 1e-5);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_GE(bounds->epsilon_upper, 2.3816 - 5e-5);
  EXPECT_LE(bounds->epsilon_upper, (2.3816 + 5e-5) * 1.0002);
  EXPECT_LE(bounds->epsilon_lower, 2.3816 + 5e-5);
  EXPECT_GE(bounds->epsilon_lower, (2.3816 - 5e-5) * 0.998);
}

// Microsoft's PRV accountant (Gopi, Lee, Wutschitz 2021), published upper bounds at
// delta = 1e-6. An upper bound must lie above dpkit's certified lower bound. The PRV
// values include that accountant's own error allowance (eps_error), so they sit above
// the exact value; for (2.0, 0.001, 20000) the allowance is ~3% of eps = 0.3 (dpkit's
// certified bounds there are [0.29578, 0.29581]), so only the other two are held to the
// 1 % closeness.
TEST(PldTest, PrvAccountantUpperBoundsAreConsistent) {
  struct Case { double sigma, q; int64_t steps; double prv; bool close; };
  for (const Case& c : {Case{1.5, 0.05, 1000, 6.209969, true},
                        Case{2.0, 0.001, 20000, 0.305838, false},
                        Case{3.0, 0.05, 50000, 24.942006, true}}) {
    const Event event = *DpSgdEvent(c.q, c.sigma, c.steps);
    auto bounds = PldEpsilon(event, 1e-6);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_GE(c.prv, bounds->epsilon_lower) << c.sigma;
    EXPECT_GE(c.prv, bounds->epsilon_upper * 0.99) << c.sigma;
    if (c.close) {
      EXPECT_LE(c.prv, bounds->epsilon_upper * 1.01) << c.sigma;
    }
  }
}

TEST(PldTest, LowerNeverExceedsUpperAcrossSettings) {
  for (double q : {1e-4, 0.01, 0.5}) {
    for (double sigma : {0.5, 1.0, 5.0}) {
      for (int64_t steps : {1, 1000}) {
        for (double delta : {1e-12, 1e-5, 1e-3}) {
          const Event event = *DpSgdEvent(q, sigma, steps);
          auto bounds = PldEpsilon(event, delta);
          ASSERT_TRUE(bounds.ok()) << bounds.error();
          EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
          EXPECT_TRUE(std::isfinite(bounds->epsilon_upper));
          EXPECT_GE(bounds->epsilon_lower, 0);
        }
      }
    }
  }
}

TEST(PldTest, EpsilonIsMonotoneInSteps) {
  double previous = 0;
  for (int64_t steps : {10, 100, 1000, 10000}) {
    auto bounds = PldEpsilon(*DpSgdEvent(0.01, 1.0, steps), 1e-5);
    ASSERT_TRUE(bounds.ok());
    EXPECT_GT(bounds->epsilon_lower, previous);
    previous = bounds->epsilon_upper;
  }
}

TEST(PldTest, HandlesLargeEpsilonAndTinyDelta) {
  auto large = PldEpsilon(*DpSgdEvent(0.5, 0.5, 1000), 1e-15);
  ASSERT_TRUE(large.ok()) << large.error();
  EXPECT_TRUE(std::isfinite(large->epsilon_upper));
  EXPECT_GT(large->epsilon_lower, 50);
  EXPECT_LE(large->epsilon_lower, large->epsilon_upper);
  auto tiny = PldEpsilon(*DpSgdEvent(256.0 / 60000, 1.1, 14063), 1e-15);
  ASSERT_TRUE(tiny.ok()) << tiny.error();
  EXPECT_LE(tiny->epsilon_lower, tiny->epsilon_upper);
  EXPECT_LE(tiny->epsilon_upper, tiny->epsilon_lower * 1.01);
}

// Pure eps-DP: randomized response is the worst case, delta(e') = (e^eps - e^e')/(1+e^eps).
TEST(PldTest, PureDpMatchesRandomizedResponse) {
  const double eps = 1.0;
  auto bounds = PldDelta(*Event::PureDp(eps), 0.5);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  const double exact = (std::exp(1.0) - std::exp(0.5)) / (1 + std::exp(1.0));
  EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-12));
  EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-12));
  EXPECT_NEAR(bounds->delta_upper, exact, 1e-3 * exact);
}

// Laplace with scale b is exactly (1/b)-DP: eps(delta) <= 1/b for any delta, and the
// privacy loss has an atom of mass 1/2 at 1/b, so delta(eps) > 0 for every eps < 1/b.
TEST(PldTest, LaplaceEpsilonIsAtMostOneOverScale) {
  auto bounds = PldEpsilon(*Event::Laplace(2.0), 1e-9);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->epsilon_upper, 0.5 + 0.01);
  // Exact: delta(eps) ~ (1/2)(1 - e^{eps - 1/2}) just below 1/2 (the atom), so
  // eps(1e-9) = 1/2 - ~2e-9.
  EXPECT_GE(bounds->epsilon_upper, 0.5 - 1e-8);
  // delta(0) for one Laplace: TV distance between Lap(0,b) and Lap(1,b) = 1 - e^{-1/(2b)}.
  auto delta0 = PldDelta(*Event::Laplace(2.0), 0.0);
  ASSERT_TRUE(delta0.ok());
  const double tv = 1 - std::exp(-0.25);
  EXPECT_LE(delta0->delta_lower, tv * (1 + 1e-12));
  EXPECT_GE(delta0->delta_upper, tv * (1 - 1e-12));
  EXPECT_NEAR(delta0->delta_upper, tv, 1e-3);
}

TEST(PldTest, HeterogeneousCompositionEqualsSumOfSquares) {
  // Gaussians compose to a Gaussian: sigma 1 and 2 together are mu-GDP with
  // mu = sqrt(1 + 1/4).
  const Event event = *Event::Composed({Gaussian(1.0), Gaussian(2.0)});
  const double exact = static_cast<double>(GaussianEpsilon(std::sqrt(1.25L), 1e-6));
  auto bounds = PldEpsilon(event, 1e-6);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->epsilon_lower, exact * (1 + 1e-12));
  EXPECT_GE(bounds->epsilon_upper, exact * (1 - 1e-12));
  EXPECT_LE(bounds->epsilon_upper, exact * 1.001);
}

TEST(PldTest, RejectsBadInput) {
  const Event event = Gaussian(1.0);
  EXPECT_FALSE(PldEpsilon(event, 0).ok());
  EXPECT_FALSE(PldEpsilon(event, 1).ok());
  EXPECT_FALSE(PldEpsilon(event, std::nan("")).ok());
  EXPECT_FALSE(PldDelta(event, -1).ok());
  EXPECT_FALSE(PldDelta(event, INFINITY).ok());
  PldOptions bad;
  bad.epsilon_tolerance = 0;
  EXPECT_EQ(PldEpsilon(event, 1e-5, bad).error(),
            "epsilon_tolerance must be in [1e-7, 0.1], got 0");
  auto wor = Event::SampledWithoutReplacement(100, 10, event);
  ASSERT_TRUE(wor.ok());
  EXPECT_FALSE(PldEpsilon(*wor, 1e-5).ok());
}

}  // namespace
}  // namespace dpkit::accounting
