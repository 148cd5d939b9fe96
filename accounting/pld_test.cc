#include "dpkit/accounting/pld.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_testing.h"
#include "boost/math/quadrature/gauss_kronrod.hpp"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

using pld_internal::Bound;

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

// Coarse grids make the discretisation error large, so an optimistic PMF that is not
// really dominated (or a pessimistic one that does not dominate) shows up as a bound on
// the wrong side of the exact value. Exact values: the composed Gaussian's closed form,
// the Laplace mechanism's delta(eps) = 1 - e^{(eps - 1/b)/2} for eps <= 1/b (direct
// integration of (p - e^eps q)_+ for Lap(0, b) vs Lap(1, b)), and quadrature for one
// Poisson-subsampled Gaussian.
TEST(PldTest, CoarseGridsStillBracketTheExactValue) {
  for (double h : {0.003, 0.02, 0.1, 0.4}) {
    PldOptions options;
    options.discretization_interval = h;
    for (int64_t steps : {1, 3, 40}) {
      for (double eps : {0.0, 0.0137, 0.291, 1.234}) {
        SCOPED_TRACE(testing::Message() << "h " << h << " T " << steps << " eps " << eps);
        const double sigma = 1.3;
        const long double exact =
            GaussianDelta(std::sqrt(static_cast<long double>(steps)) / sigma, eps);
        auto bounds = PldDelta(*Event::SelfComposed(Gaussian(sigma), steps), eps, options);
        ASSERT_TRUE(bounds.ok()) << bounds.error();
        EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-12L));
        EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-12L));
      }
    }
    for (double eps : {0.0, 0.0137, 0.1234, 0.351}) {
      SCOPED_TRACE(testing::Message() << "Laplace h " << h << " eps " << eps);
      const double b = 2.5;
      const long double exact = 1 - std::exp((static_cast<long double>(eps) - 1 / b) / 2);
      auto bounds = PldDelta(*Event::Laplace(b), eps, options);
      ASSERT_TRUE(bounds.ok()) << bounds.error();
      EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-12L));
      EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-12L));
    }
    for (double q : {0.001, 0.05, 0.5}) {
      for (double eps : {0.0, 0.0137, 0.0517, 0.813}) {
        SCOPED_TRACE(testing::Message() << "sampled h " << h << " q " << q << " eps " << eps);
        const long double exact = SubsampledGaussianDeltaByQuadrature(q, 0.7, eps);
        auto bounds = PldDelta(*Event::PoissonSampled(q, Gaussian(0.7)), eps, options);
        ASSERT_TRUE(bounds.ok()) << bounds.error();
        EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-10L));
        EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-10L));
      }
    }
  }
}

// Issue 21: delta at a huge epsilon (1e300) failed with a grid of 2^63 points (its size
// overflowed) or took minutes. Above 1e6 the bound at 1e6 holds (delta is nonincreasing
// in epsilon) and is returned in about a second, with no lower bound.
TEST(PldTest, DeltaAtHugeEpsilonIsTheBoundAtTheCap) {
  const Event event = *DpSgdEvent(0.01, 1.0, 1000);
  auto at_cap = PldDelta(event, 1e6);
  ASSERT_TRUE(at_cap.ok()) << at_cap.error();
  for (double epsilon : {1e7, 1e300}) {
    auto bounds = PldDelta(event, epsilon);
    ASSERT_TRUE(bounds.ok()) << epsilon << ": " << bounds.error();
    EXPECT_EQ(bounds->delta_upper, at_cap->delta_upper) << epsilon;
    EXPECT_EQ(bounds->delta_lower, 0) << epsilon;
    EXPECT_LT(bounds->delta_upper, 1e-30) << epsilon;
  }
}

// Issue 21, soundness 3: at q = 1e-4, T = 10, delta = 1e-15 the FFT composition's absolute
// error allowances floored the upper bound near 7e-5 for every sigma (sigma 30: 6.89e-5,
// sigma 50: 7.06e-5, sigma 100: 5.26e-5; gaps of 34-77 %). The direct composition of a few
// uses keeps relative errors: the bounds are tight and decrease with sigma.
TEST(PldTest, FewStepsAtTinyDeltaAreTightAndMonotoneInSigma) {
  double previous_lower = std::numeric_limits<double>::infinity();
  for (double sigma : {30.0, 50.0, 100.0}) {
    auto bounds = PldEpsilon(*DpSgdEvent(1e-4, sigma, 10), 1e-15);
    ASSERT_TRUE(bounds.ok()) << sigma << ": " << bounds.error();
    EXPECT_LE(bounds->epsilon_upper - bounds->epsilon_lower, 0.05 * bounds->epsilon_upper)
        << sigma << ": [" << bounds->epsilon_lower << ", " << bounds->epsilon_upper << "]";
    // The true epsilon decreases with sigma: each upper bound is below the previous
    // (smaller sigma's) lower bound.
    EXPECT_LT(bounds->epsilon_upper, previous_lower) << sigma;
    previous_lower = bounds->epsilon_lower;
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
// delta = 1e-6 for (sigma, q, T) = (1.5, 0.05, 1000), (2.0, 0.001, 20000),
// (3.0, 0.05, 50000). PRV reports (eps_low, eps_estimate, eps_up) with
// eps_up = eps_estimate + eps_error for an ABSOLUTE eps_error chosen by the caller (its
// compute_delta_upper(eps) evaluates its estimate at eps - eps_error; prv_accountant,
// accountant.py); these values were computed with eps_error = 0.01. So the exact eps is
// only claimed to lie in [eps_up - 2 eps_error, eps_up], and eps_up sits about 0.01 above
// the exact value: 3.4 % of eps = 0.3 in the middle case, which is why it is not within
// 1 % of dpkit's certified value there. Checked independently of that explanation: in
// all three cases PRV's value minus 0.01 (its estimate) agrees with dpkit's certified
// interval to 1e-3 (dpkit: [6.19926, 6.19990], [0.29578, 0.29581], [24.9290, 24.9323];
// PRV minus 0.01: 6.20997, 0.29584, 24.93201), while a loose bound would show no such
// fixed offset. Asserted: PRV's upper bound is above dpkit's certified lower bound;
// dpkit's certified upper bound is below PRV's and within PRV's stated error interval
// [eps_up - 2 eps_error, eps_up]; PRV's estimate is within 1e-3 of dpkit's upper bound;
// and where 1 % of eps is wider than PRV's error (the first and last case) dpkit's upper
// bound is within 1 % of PRV's value, as the issue asks.
TEST(PldTest, PrvAccountantUpperBoundsAreConsistent) {
  struct Case { double sigma, q; int64_t steps; double prv; };
  constexpr double kPrvEpsError = 0.01;
  for (const Case& c : {Case{1.5, 0.05, 1000, 6.209969}, Case{2.0, 0.001, 20000, 0.305838},
                        Case{3.0, 0.05, 50000, 24.942006}}) {
    const Event event = *DpSgdEvent(c.q, c.sigma, c.steps);
    auto bounds = PldEpsilon(event, 1e-6);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_GE(c.prv, bounds->epsilon_lower) << c.sigma;
    EXPECT_LE(bounds->epsilon_upper, c.prv) << c.sigma;
    EXPECT_GE(bounds->epsilon_upper, c.prv - 2 * kPrvEpsError) << c.sigma;
    EXPECT_NEAR(c.prv - kPrvEpsError, bounds->epsilon_upper, 1e-3) << c.sigma;
    if (0.01 * c.prv > kPrvEpsError) {
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

// delta(eps) of `count` compositions of randomized response with parameter e, directly:
// the loss is (2k − count) e with k ~ Binomial(count, e^e/(1+e^e)).
double ComposedRandomizedResponseDelta(double e, int count, double eps) {
  const double p = std::exp(e) / (1 + std::exp(e));
  double delta = 0, binom = 1;
  for (int k = 0; k <= count; ++k) {
    if (k > 0) binom = binom * (count - k + 1) / k;
    const double loss = (2.0 * k - count) * e;
    if (loss > eps) {
      delta += binom * std::pow(p, k) * std::pow(1 - p, count - k) * -std::expm1(eps - loss);
    }
  }
  return delta;
}

// An eps-bounded-range event is bracketed by the worst eps-DP mechanism (randomized
// response with eps, upper) and by an eps-BR member of its class (randomized response
// with eps/2, lower): the certified bounds must enclose the interval between them.
TEST(PldTest, BoundedRangeLiesBetweenHalfAndFullRandomizedResponse) {
  const double eps = 1.0, target = 2.0;
  const int count = 10;
  auto bounds = PldDelta(*Event::SelfComposed(*Event::BoundedRange(eps), count), target);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  const double full = ComposedRandomizedResponseDelta(eps, count, target);
  const double half = ComposedRandomizedResponseDelta(eps / 2, count, target);
  ASSERT_LT(half, full);
  EXPECT_GE(bounds->delta_upper, full * (1 - 1e-12));
  EXPECT_NEAR(bounds->delta_upper, full, 1e-2 * full);
  EXPECT_LE(bounds->delta_lower, half * (1 + 1e-12));
  EXPECT_NEAR(bounds->delta_lower, half, 1e-2 * half);
  // Poisson sampling of a bounded-range event is left to the RDP accountant.
  EXPECT_FALSE(PldDelta(*Event::PoissonSampled(0.1, *Event::BoundedRange(eps)), 1.0).ok());
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
  // delta(epsilon) queries refine the grid like epsilon queries: the gap is within 10x
  // the default tolerance (1e-4) relative to delta (it was 4.5x that before refinement).
  EXPECT_LE(delta0->delta_upper - delta0->delta_lower, 10 * 1e-4 * tv);
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

// q = 1 through the DP-SGD event: the T-fold Gaussian mechanism, mu-GDP with
// mu = sqrt(T)/sigma (Bu et al. 2020, eq. 3.2), from very little to very much noise.
TEST(PldTest, FullSamplingMatchesComposedGaussianClosedForm) {
  struct Case { double sigma; int64_t steps; };
  for (const Case& c : {Case{0.5, 1}, Case{5.0, 100}, Case{100.0, 1000000}}) {
    const long double mu = std::sqrt(static_cast<long double>(c.steps)) / c.sigma;
    const double exact = static_cast<double>(GaussianEpsilon(mu, 1e-5));
    auto bounds = PldEpsilon(*DpSgdEvent(1.0, c.sigma, c.steps), 1e-5);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, exact * (1 + 1e-12)) << c.sigma;
    EXPECT_GE(bounds->epsilon_upper, exact * (1 - 1e-12)) << c.sigma;
    EXPECT_LE(bounds->epsilon_upper, exact * 1.001) << c.sigma;
    EXPECT_GE(bounds->epsilon_lower, exact * 0.995) << c.sigma;
  }
}

// q = 1e-9, T = 1000, sigma = 1: total variation is subadditive under composition and
// scaled by q under Poisson sampling, so delta(0) <= T q TV(N(0,1), N(1,1)) =
// T q (2 Phi(1/2) - 1) ~ 3.8e-7 < 1e-5: eps(1e-5) = 0 exactly. That bound is NOT tight
// (the T shifted coordinates have no common optimal test: delta(0) ~ T q E(Y - 1)_+,
// Y = mean of e^{x_j - 1/2}, about 20x smaller). Independent lower bound: the test
// S = {sum_j o_j > 1/2} gives delta(0) >= P(S) - Q(S) >= T q (1 - q)^{T-1}
// (Phibar(-1/(2 sqrt T)) - Phibar(1/(2 sqrt T))) (only the term with exactly one
// sampled step is kept; the others are >= 0).
TEST(PldTest, TinySamplingRateGivesZeroEpsilon) {
  const Event event = *DpSgdEvent(1e-9, 1.0, 1000);
  auto bounds = PldEpsilon(event, 1e-5);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_EQ(bounds->epsilon_upper, 0);
  EXPECT_EQ(bounds->epsilon_lower, 0);
  const long double tv_bound = 1000 * 1e-9L * (1 - 2 * PhiUpper(0.5L));
  auto delta0 = PldDelta(event, 0.0);
  ASSERT_TRUE(delta0.ok()) << delta0.error();
  const long double root_t = std::sqrt(1000.0L);
  const long double test_bound = 1000 * 1e-9L * std::pow(1 - 1e-9L, 999) *
                                 (PhiUpper(-0.5L / root_t) - PhiUpper(0.5L / root_t));
  EXPECT_LE(delta0->delta_lower, tv_bound);
  EXPECT_GE(delta0->delta_upper, test_bound);
  EXPECT_LE(delta0->delta_upper, tv_bound * 1.01L);
}

// Inputs at the edges of what `dpkit epsilon` accepts: a certified answer or a one-line
// error, never a crash, NaN or a runaway grid (these return in well under a second each).
TEST(PldTest, ExtremeInputsGiveAnswersOrOneLineErrors) {
  // sigma 0.01 with 1e8 steps: the losses span ~1e10, beyond the grid limit at spacing 1.
  auto huge = PldEpsilon(*DpSgdEvent(0.01, 0.01, 100000000), 1e-5);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().rfind("the privacy loss grid would need ", 0), 0u) << huge.error();
  // Typed: the driver retried coarser grids on ErrorCode::kGridLimit up to spacing 1.
  EXPECT_EQ(huge.error_value().code, ErrorCode::kGridLimit);
  EXPECT_GT(huge.error_value().grid_points, 0);
  EXPECT_NE(huge.error().find("at spacing 1;"), std::string::npos) << huge.error();
  EXPECT_EQ(huge.error().find('\n'), std::string::npos);
  // sigma 0.01 with few steps: certified (if loose) bounds.
  auto tiny_noise = PldEpsilon(*DpSgdEvent(0.1, 0.01, 10), 1e-5);
  ASSERT_TRUE(tiny_noise.ok()) << tiny_noise.error();
  EXPECT_TRUE(std::isfinite(tiny_noise->epsilon_upper));
  EXPECT_LE(tiny_noise->epsilon_lower, tiny_noise->epsilon_upper);
  // Independent lower bound: for P = (1-q) A + q B, Q = A and any set S,
  // P(S) - e^eps Q(S) >= q (B(S) - (e^eps / q) A(S)), so delta(eps) >=
  // q delta_G(eps + log(1/q)) with delta_G the Gaussian pair (mu = 1/sigma = 100), and
  // composing more steps cannot lower delta: eps(1e-5) >= eps_G(1e-5 / q) - log(1/q).
  const double one_step =
      static_cast<double>(GaussianEpsilon(100, 1e-4)) - std::log(10.0);
  EXPECT_GE(tiny_noise->epsilon_upper, one_step);
  // sigma 100: tiny eps, resolved to the requested tolerance by grid refinement.
  auto quiet = PldEpsilon(*DpSgdEvent(0.01, 100, 1000), 1e-5);
  ASSERT_TRUE(quiet.ok()) << quiet.error();
  EXPECT_GT(quiet->epsilon_lower, 0);
  EXPECT_LE(quiet->epsilon_upper - quiet->epsilon_lower, 1e-3 * quiet->epsilon_upper);
  // eps up to 100 and beyond: delta at eps = 100 is a certified interval in [0, 1].
  for (double q : {0.01, 0.5}) {
    auto d = PldDelta(*DpSgdEvent(q, 0.5, 1000), 100);
    ASSERT_TRUE(d.ok()) << d.error();
    EXPECT_GE(d->delta_lower, 0);
    EXPECT_LE(d->delta_lower, d->delta_upper);
    EXPECT_LE(d->delta_upper, 1);
  }
  // delta down to 1e-200 is supported; below, a clean error.
  auto small = PldEpsilon(*DpSgdEvent(0.01, 1.0, 1000), 1e-200);
  ASSERT_TRUE(small.ok()) << small.error();
  EXPECT_TRUE(std::isfinite(small->epsilon_upper));
  EXPECT_LE(small->epsilon_lower, small->epsilon_upper);
  EXPECT_LE(small->epsilon_upper, small->epsilon_lower * 1.001);
  auto too_small = PldEpsilon(*DpSgdEvent(0.01, 1.0, 1000), 1e-300);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.error(), "the pld accountant supports delta >= 1e-200, got 1e-300");
}

TEST(PldTest, TinyNoiseNeverGivesASmallEpsilon) {
  // Regression: with noise so small that the privacy loss exceeds e^{11356} (the long
  // double range), losses used to overflow and the subsampled Gaussian's high-loss mass
  // was silently lost (sigma = 0.001, q = 0.25 gave "epsilon <= 0.3"). Independent lower
  // bound on the exact epsilon of T >= 1 steps: the test S = {x > 1/2} on the first step
  // has P(S) >= q Phi(1/(2 sigma)) under "record in" and Q(S) = Phibar(1/(2 sigma)) <=
  // phi(z)/z (Mills ratio, z = 1/(2 sigma)) under "record out", so delta(eps) >= P(S) -
  // e^eps Q(S) > delta for every eps < log((P(S) - delta)/Q(S)), and the other steps'
  // outputs can be ignored (post-processing). Also: less noise never gives a smaller
  // certified epsilon.
  const double delta = 1e-5;
  for (double q : {0.01, 0.25}) {
    for (int64_t steps : {1, 2, 10}) {
      double previous = 0;
      for (double sigma : {5.0, 1.0, 0.2, 0.05, 0.01, 0.006, 1e-3, 1e-6}) {
        SCOPED_TRACE(testing::Message() << "q " << q << " T " << steps << " sigma " << sigma);
        auto event = DpSgdEvent(q, sigma, steps);
        ASSERT_TRUE(event.ok());
        auto bounds = PldEpsilon(*event, delta);
        ASSERT_TRUE(bounds.ok()) << bounds.error();
        const long double z = 0.5L / sigma;
        const long double log_q_s = -z * z / 2 - std::log(z * std::sqrt(2 * M_PIl));
        const long double p_s = q * (1 - 0.5L * std::erfc(z / std::sqrt(2.0L)));
        const long double exact_at_least = std::log(p_s - delta) - log_q_s;
        EXPECT_GE(static_cast<long double>(bounds->epsilon_upper), exact_at_least);
        EXPECT_GE(bounds->epsilon_upper, previous);
        EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
        previous = bounds->epsilon_upper;
      }
    }
  }
}

TEST(PldTest, TinyNoiseManyStepsAndTinyLaplaceScaleNeverGiveASmallEpsilon) {
  // Same independent lower bound as above for T = 1000 steps (post-processing: only the
  // first step's output is tested). For Laplace(b), Poisson-sampled at rate q, the test
  // S = {o >= 1/2} has P(S) >= q (1 - e^{-1/(2b)}/2) and Q(S) = e^{-1/(2b)}/2, so the
  // exact epsilon is >= log(P(S) - delta) + log 2 + 1/(2b).
  const double delta = 1e-5;
  for (double sigma : {0.05, 1e-3, 1e-6}) {
    SCOPED_TRACE(testing::Message() << "gaussian sigma " << sigma);
    auto bounds = PldEpsilon(*DpSgdEvent(0.25, sigma, 1000), delta);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    const long double z = 0.5L / sigma;
    const long double log_q_s = -z * z / 2 - std::log(z * std::sqrt(2 * M_PIl));
    const long double p_s = 0.25L * (1 - 0.5L * std::erfc(z / std::sqrt(2.0L)));
    EXPECT_GE(static_cast<long double>(bounds->epsilon_upper),
              std::log(p_s - delta) - log_q_s);
    EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
  }
  for (double q : {1.0, 0.25}) {
    double previous = 0;
    for (double b : {1.0, 0.1, 1e-3, 1e-4, 1e-6}) {
      SCOPED_TRACE(testing::Message() << "laplace q " << q << " scale " << b);
      auto event = Event::PoissonSampled(q, *Event::Laplace(b));
      ASSERT_TRUE(event.ok());
      for (int64_t steps : {int64_t{1}, int64_t{10}}) {
        auto composed = Event::SelfComposed(*event, steps);
        ASSERT_TRUE(composed.ok());
        auto bounds = PldEpsilon(*composed, delta);
        ASSERT_TRUE(bounds.ok()) << bounds.error();
        const long double p_s = q * (1 - 0.5L * std::exp(-0.5L / b));
        EXPECT_GE(static_cast<long double>(bounds->epsilon_upper),
                  std::log(p_s - delta) + std::log(2.0L) + 0.5L / b);
        EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
        if (steps == 1) {
          EXPECT_GE(bounds->epsilon_upper, previous);
          previous = bounds->epsilon_upper;
        }
      }
    }
  }
}

TEST(PldTest, DeltaQueriesRefineTheGridToTheLimit) {
  // Bu et al. (2020) Table 1 setting with sigma = 0.5 (q = 256/60000, 15 epochs): delta(0)
  // = 1 - (min type I + type II error). Before delta queries were refined (and before
  // refinement went up to the grid limit instead of stopping), the certified interval
  // was [0.098, 0.501]; on the finer grid it is about 1e-3 wide.
  const Event event = *DpSgdEvent(256.0 / 60000, 0.5, 3516);
  auto delta0 = PldDelta(event, 0.0);
  ASSERT_TRUE(delta0.ok()) << delta0.error();
  EXPECT_LE(delta0->delta_lower, delta0->delta_upper);
  EXPECT_LE(delta0->delta_upper - delta0->delta_lower, 0.005);
}

// T >= 262144 steps of one component are composed in two stages (6): sqrt(T)
// steps on the fine grid, re-discretised onto a coarser grid, then powered. q = 1: the
// T-fold Gaussian is exactly mu-GDP (closed form as above), so both stages' certified
// bounds must bracket it and stay within the targets (upper 0.1 %, lower 0.5 %).
TEST(PldTest, TwoStageCompositionMatchesClosedForm) {
  struct Case { double sigma; int64_t steps; double delta; };
  for (const Case& c : {Case{500.0, 1000000, 1e-5}, Case{150.0, 300007, 1e-10},
                        Case{2000.0, 4000000, 1e-3}}) {
    SCOPED_TRACE(testing::Message() << "sigma " << c.sigma << " T " << c.steps);
    const Event event = *Event::SelfComposed(Gaussian(c.sigma), c.steps);
    const double mu = std::sqrt(static_cast<double>(c.steps)) / c.sigma;
    const double exact = static_cast<double>(GaussianEpsilon(mu, c.delta));
    auto bounds = PldEpsilon(event, c.delta);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, exact * (1 + 1e-12));
    EXPECT_GE(bounds->epsilon_upper, exact * (1 - 1e-12));
    EXPECT_LE(bounds->epsilon_upper, exact * 1.001);
    EXPECT_GE(bounds->epsilon_lower, exact * 0.995);
  }
  for (double eps : {0.5, 3.0}) {
    const Event event = *Event::SelfComposed(Gaussian(500.0), 1000000);
    const long double exact = GaussianDelta(2.0L, eps);
    auto bounds = PldDelta(event, eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->delta_lower, exact * (1 + 1e-12L)) << eps;
    EXPECT_GE(bounds->delta_upper, exact * (1 - 1e-12L)) << eps;
    EXPECT_LE(bounds->delta_upper, exact * 1.01) << eps;
    EXPECT_GE(bounds->delta_lower, exact * 0.99) << eps;
  }
}

// The benchmark's T = 1e6 row (q = 0.001, sigma = 1.5, delta = 1e-5), composed in two
// stages. Reference: the single-stage composition (commit 04d2950, one 614400-point FFT
// window) certified [3.14208249, 3.14265875]. Both are certified, so the two intervals
// must overlap, and the two-stage one must meet the targets relative to any
// value in the old interval (upper within 0.1 %, lower within 0.5 %).
// At delta = 1e-15 the single-stage interval was [6.00829506, 6.00911075]; the upper bound
// must stay within 0.02 % of it (a first version lost 0.055 % there: the first stage's
// window left untilted mass above it, put at +inf in each of the 1000 factors, of the
// order of delta itself).
TEST(PldTest, MillionStepsAgreeWithTheSingleStageInterval) {
  struct Case { double delta, old_lower, old_upper, upper_slack; };
  for (const Case& c : {Case{1e-5, 3.14208249, 3.14265875, 1.001},
                        Case{1e-15, 6.00829506, 6.00911075, 1.0002}}) {
    SCOPED_TRACE(testing::Message() << "delta " << c.delta);
    auto bounds = PldEpsilon(*DpSgdEvent(0.001, 1.5, 1000000), c.delta);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, c.old_upper);
    EXPECT_GE(bounds->epsilon_upper, c.old_lower);
    EXPECT_LE(bounds->epsilon_upper, c.old_lower * c.upper_slack);
    EXPECT_GE(bounds->epsilon_lower, c.old_upper * 0.995);
  }
}

// Regression (issue 3, lower-bound target): with sigma = 0.5 the optimistic PMF's tangent
// correction removes a P-mass fraction eta per step that compounds over T steps. The old
// code certified only [213.640, 221.908] (q = 0.01, T = 1e5), [0, 1617.65] (q = 0.01,
// T = 1e6), [6242.34, 6425.31] (q = 0.1, T = 1e5) and [666798.6, 669816.6] (q = 0.5,
// T = 1e6): lower bounds 3.7 %, 100 %, 2.8 % and 0.45 % below the upper. Composing in two stages keeps the windows small
// enough for the grid refinement to reach spacings where T eta is small. At q = 0.001 the
// bulk of a step's loss sits in a few cells and the tangent PMFs still gave [5.1414,
// 5.2268] (T = 1e4) and [48.579, 52.342] (T = 1e6); the mass-preserving chain (
// (3b)) gives [5.22677, 5.22683] and [52.3399, 52.3422]. The exact value
// lies between the two certified bounds, so a lower bound within 0.5 % of the certified
// upper bound is within 0.5 % of the exact value.
TEST(PldTest, SmallNoiseManyStepsLowerBoundIsTight) {
  struct Case { double q; int64_t steps; };
  for (const Case& c : {Case{0.01, 100000}, Case{0.01, 1000000}, Case{0.1, 100000},
                        Case{0.5, 1000000}, Case{0.001, 10000}, Case{0.001, 1000000}}) {
    SCOPED_TRACE(testing::Message() << "q " << c.q << " T " << c.steps);
    auto bounds = PldEpsilon(*DpSgdEvent(c.q, 0.5, c.steps), 1e-5);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
    EXPECT_GE(bounds->epsilon_lower, bounds->epsilon_upper * 0.995);
  }
}

// The decomposed bounds (7) of pld_decomposed (bulk on a fine grid, tail on its own grid, blocks
// of ~sqrt(T) steps) on their own: on the right side of the closed form of the composed
// Gaussian (q = 1) and of the ordinary certified bounds for subsampled and Laplace laws,
// and close to them (they are meant to be tight).
TEST(PldTest, DecomposedBoundsAreCertified) {
  struct Case { double sigma; int64_t steps; double delta; double h; };
  for (const Case& c : {Case{1.0, 16, 1e-5, 1e-2}, Case{4.0, 400, 1e-10, 1e-3},
                        Case{2.0, 10007, 1e-5, 1e-3}}) {
    SCOPED_TRACE(testing::Message() << "sigma " << c.sigma << " T " << c.steps);
    const Event event = *Event::SelfComposed(Gaussian(c.sigma), c.steps);
    const double exact = static_cast<double>(
        GaussianEpsilon(std::sqrt(static_cast<double>(c.steps)) / c.sigma, c.delta));
    auto lower = DecomposedEpsilonBoundForTesting(event, c.delta, c.h, Bound::kLower);
    ASSERT_TRUE(lower.ok()) << lower.error();
    EXPECT_LE(*lower, exact * (1 + 1e-12));
    EXPECT_GE(*lower, exact * 0.995);
    auto upper = DecomposedEpsilonBoundForTesting(event, c.delta, c.h, Bound::kUpper);
    ASSERT_TRUE(upper.ok()) << upper.error();
    EXPECT_GE(*upper, exact * (1 - 1e-12));
    EXPECT_LE(*upper, exact * 1.001);
  }
  struct Sampled { double q, sigma; int64_t steps; double h; };
  for (const Sampled& c : {Sampled{0.01, 1.0, 1000, 1e-3}, Sampled{0.001, 0.5, 10000, 4e-5},
                           Sampled{0.0001, 0.5, 10000, 4e-5}}) {
    SCOPED_TRACE(testing::Message() << "q " << c.q << " sigma " << c.sigma << " T " << c.steps);
    const Event event = *DpSgdEvent(c.q, c.sigma, c.steps);
    auto lower = DecomposedEpsilonBoundForTesting(event, 1e-5, c.h, Bound::kLower);
    ASSERT_TRUE(lower.ok()) << lower.error();
    auto upper = DecomposedEpsilonBoundForTesting(event, 1e-5, c.h, Bound::kUpper);
    ASSERT_TRUE(upper.ok()) << upper.error();
    auto bounds = PldEpsilon(event, 1e-5);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(*lower, bounds->epsilon_upper);
    EXPECT_GE(*lower, bounds->epsilon_upper * 0.995);
    EXPECT_GE(*upper, bounds->epsilon_lower);
    EXPECT_LE(*upper, bounds->epsilon_upper * 1.005);
  }
  auto laplace = *Event::SelfComposed(*Event::Laplace(5.0), 100);
  auto lower = DecomposedEpsilonBoundForTesting(laplace, 1e-6, 1e-3, Bound::kLower);
  ASSERT_TRUE(lower.ok()) << lower.error();
  auto bounds = PldEpsilon(laplace, 1e-6);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(*lower, bounds->epsilon_upper);
  EXPECT_GE(*lower, bounds->epsilon_upper * 0.99);
}

// Regression (issue 3, lower-bound target at q = 1e-4): a step's loss bulk there is about
// q wide, a few cells of any grid that T = 1e4..1e6 steps can afford, and every
// dominated discretisation on it loses a first-order amount per step: the ordinary lower
// bounds were [1.1183, 1.1753] (T = 1e4), [1.5255, 2.0578] (T = 1e5), [0.92, 3.90]
// (T = 1e6) at sigma = 0.5 and 0 (sigma = 0.6, T = 1e5). The decomposed bound (7) brings
// them within 0.5 % (within 0.11 % here).
TEST(PldTest, TinySamplingRateSmallNoiseLowerBoundIsTight) {
  struct Case { double sigma; int64_t steps; };
  for (const Case& c : {Case{0.5, 10000}, Case{0.5, 1000000}, Case{0.6, 100000}}) {
    SCOPED_TRACE(testing::Message() << "sigma " << c.sigma << " T " << c.steps);
    auto bounds = PldEpsilon(*DpSgdEvent(0.0001, c.sigma, c.steps), 1e-5);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
    EXPECT_GE(bounds->epsilon_lower, bounds->epsilon_upper * 0.995);
  }
}

// Tiny epsilon from heavily tilted laws (q = 1e-4, sigma >= 5, T = 1e6): the cell moments
// from tail differences left gaps of 0.25-2.4 % here (their CDF allowances, divided by
// e^h - 1, compound over 1e6 steps); with the quadrature enclosures (2b) the gap
// is within the 0.1 % target. Independent sanity check: Bu et al.'s CLT (mu = q sqrt(T
// (e^{1/sigma^2} - 1)), eq. 3.3; accurate here, not certified) lies within 1 % of the
// certified interval.
TEST(PldTest, TinyEpsilonFromHeavilyTiltedLawsIsTight) {
  struct Case { double sigma, delta; };
  for (const Case& c : {Case{20, 1e-3}, Case{20, 1e-5}, Case{5, 1e-3}}) {
    SCOPED_TRACE(testing::Message() << "sigma " << c.sigma << " delta " << c.delta);
    const double q = 1e-4, steps = 1e6;
    auto bounds = PldEpsilon(*DpSgdEvent(q, c.sigma, 1000000), c.delta);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
    EXPECT_LE(bounds->epsilon_upper - bounds->epsilon_lower, 1e-3 * bounds->epsilon_upper);
    const long double mu =
        q * std::sqrt(steps * std::expm1(1.0L / (c.sigma * c.sigma)));
    const double clt = static_cast<double>(GaussianEpsilon(mu, c.delta));
    EXPECT_GE(clt, bounds->epsilon_lower * 0.99);
    EXPECT_LE(clt, bounds->epsilon_upper * 1.01);
  }
}

// Regression: `dpkit delta` at eps = 2e4 with sigma = 0.005 (q = 0.5, T = 2) reported
// "internal error" (a NaN from inf - inf: the tilt ~1e4 made the untilted error allowances
// overflow a long double). Now: certified bounds in [0, 1]. Independent check: the test
// S = {both outputs > 1} has P(S) >= (q Phi(0))^2 = 1/16 with the record and
// Q(S) = Phibar(1/sigma)^2 < e^{-1/sigma^2} without it (Mills ratio), so
// delta(eps) >= 1/16 - e^{eps - 40000} > 0.0624.
TEST(PldTest, HugeEpsilonWithTinyNoiseGivesCertifiedDelta) {
  for (double eps : {2e4, 3e4}) {
    auto bounds = PldDelta(*DpSgdEvent(0.5, 0.005, 2), eps);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_GE(bounds->delta_lower, 0);
    EXPECT_LE(bounds->delta_lower, bounds->delta_upper);
    EXPECT_LE(bounds->delta_upper, 1);
    EXPECT_GE(bounds->delta_upper, 0.0624);
  }
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
  // Sampling without replacement of anything but a Gaussian, Laplace or discrete Gaussian
  // (pld_without_replacement_test has the supported ones).
  auto wor = Event::SampledWithoutReplacement(100, 10, *Event::PureDp(1));
  ASSERT_TRUE(wor.ok());
  EXPECT_FALSE(PldEpsilon(*wor, 1e-5).ok());
}

}  // namespace
}  // namespace dpkit::accounting
