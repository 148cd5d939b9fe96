// The PLD bounds against the closed form of the composed Gaussian mechanism at huge epsilon.
//
// T steps of the Gaussian mechanism with noise multiplier sigma (sampling rate 1) compose
// to exactly one Gaussian mechanism with mu = sqrt(T) / sigma, whose hockey-stick
// divergence is
//   delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
// (Balle, Wang 2018, Thm. 8; Dong, Roth, Su 2019, Cor. 2.13). Every certified bound must
// bracket it: epsilon_lower <= eps(delta) <= epsilon_upper and delta_lower <= delta(eps) <=
// delta_upper. The settings reach T = 1e7 and epsilon ~ 5.6e7, where the composed losses
// are far beyond the exponent range of long double (e^{+-11356}): issue 21 found the
// "certified" lower bound above the exact value from epsilon ~ 1e4 on (sigma = 1, T = 1e5,
// delta = 1e-5: 51348.59 > 51347.68), see pld.cc (8).
#include <cmath>
#include <cstdint>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "boost/math/special_functions/erf.hpp"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

using ld = long double;

// Mills ratio R(x) = Phi(-x) / phi(x) for x >= 0, in long double, independent of pld.cc:
// Boost.Math's erfc below x = 20 (there Phi(-x) >= 1e-89, no underflow); above, Laplace's
// continued fraction R(x) = 1/(x + 1/(x + 2/(x + 3/(x + ...)))) (Abramowitz, Stegun
// 26.2.14), evaluated bottom-up from depth 200, where it has converged to far below long
// double precision for x >= 20.
ld MillsRatio(ld x) {
  if (x < 20) {
    const ld phi = std::exp(-x * x / 2) / std::sqrt(2 * static_cast<ld>(M_PI));
    return 0.5L * boost::math::erfc(x / std::sqrt(2.0L)) / phi;
  }
  ld t = x;
  for (int k = 200; k >= 1; --k) t = x + k / t;
  return 1 / t;
}

// delta(eps) of the composed Gaussian. With z = eps/mu - mu/2 the second term is
// e^eps Phi(-(z + mu)) = e^eps phi(z + mu) R(z + mu) = phi(z) R(z + mu), since
// e^eps phi(z + mu) = phi(z): no e^eps (which overflows) and no underflowing tail.
// The two terms are within a factor (z + mu)/z of each other where delta is small, so the
// difference keeps about 16 digits.
ld ClosedFormDelta(ld mu, ld eps) {
  const ld z = eps / mu - mu / 2;
  const ld phi_z = std::exp(-z * z / 2) / std::sqrt(2 * static_cast<ld>(M_PI));
  return 0.5L * boost::math::erfc(z / std::sqrt(2.0L)) - phi_z * MillsRatio(z + mu);
}

// eps(delta): bisection on the decreasing delta(eps) to a relative 1e-15.
ld ClosedFormEpsilon(ld mu, ld delta) {
  ld lo = 0, hi = 1;
  while (ClosedFormDelta(mu, hi) > delta) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-15L * hi; ++i) {
    const ld mid = (lo + hi) / 2;
    (ClosedFormDelta(mu, mid) > delta ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The closed form itself, against values computed with 60-digit arithmetic (mpmath's
// erfc, same formula, bisection): sigma = 1, T = 1e5, delta = 1e-5 (the issue's case) and
// sigma = 0.3, T = 1e7, delta = 1e-12.
TEST(PldClosedFormTest, ClosedFormMatchesHighPrecisionValues) {
  EXPECT_NEAR(static_cast<double>(ClosedFormEpsilon(std::sqrt(1e5L), 1e-5L)),
              51347.6835746462, 1e-7);
  EXPECT_NEAR(static_cast<double>(ClosedFormEpsilon(std::sqrt(1e7L) / 0.3L, 1e-12L)),
              55629704.526061, 1e-3);
  EXPECT_NEAR(static_cast<double>(ClosedFormEpsilon(std::sqrt(1e3L) / 5, 1e-12L)),
              63.8187302909164, 1e-10);
}

// The closed form is accurate to a relative ~1e-15 in eps; the slack 1e-12 is far below
// the issue's errors (a relative 2e-5: 0.9 at 51347.68).
constexpr double kSlack = 1e-12;

class PldClosedFormTest : public testing::TestWithParam<double> {};

TEST_P(PldClosedFormTest, EpsilonBoundsBracketTheClosedForm) {
  const double sigma = GetParam();
  for (const int64_t steps : {int64_t{10000}, int64_t{100000}, int64_t{1000000},
                              int64_t{10000000}}) {
    const ld mu = std::sqrt(static_cast<ld>(steps)) / sigma;
    const Event event = *Event::SelfComposed(*Event::Gaussian(sigma), steps);
    for (const double delta : {1e-12, 1e-5, 0.1}) {
      SCOPED_TRACE(testing::Message() << "sigma " << sigma << " T " << steps << " delta "
                                      << delta);
      const double exact = static_cast<double>(ClosedFormEpsilon(mu, delta));
      auto bounds = PldEpsilon(event, delta);
      ASSERT_TRUE(bounds.ok()) << bounds.error();
      EXPECT_LE(bounds->epsilon_lower, exact * (1 + kSlack));
      EXPECT_GE(bounds->epsilon_upper, exact * (1 - kSlack));
      // Tightness: the default tolerance (1e-4) gives gaps of 2e-6 to 7e-5 relative here;
      // 1e-3 (the issue's 0.1 %) leaves room. (sigma 0.3, T 1e7 had a lower bound of 0:
      // the chain (3b) overflowed e^{eps} in its first-stage windows near loss 17600.)
      EXPECT_LE(bounds->epsilon_upper - bounds->epsilon_lower, 1e-3 * exact);
    }
  }
}

// 1e8 steps of sigma 0.1: the grid the tolerance asks for does not fit, so a coarser one
// is used and reported (EpsilonBounds::grid_coarsened; the report then computes delta(0)
// on it instead of searching for a fitting grid again); the bounds still bracket the
// closed form. At T 1e4 the automatic grid fits.
TEST(PldClosedFormCoarsenedTest, CoarsenedGridIsReportedAndStillBracketsTheClosedForm) {
  const double delta = 1e-5;
  const int64_t steps = 100000000;
  const ld mu = std::sqrt(static_cast<ld>(steps)) / 0.1L;
  auto coarse = PldEpsilon(*Event::SelfComposed(*Event::Gaussian(0.1), steps), delta);
  ASSERT_TRUE(coarse.ok()) << coarse.error();
  EXPECT_TRUE(coarse->grid_coarsened);
  const double exact = static_cast<double>(ClosedFormEpsilon(mu, delta));
  EXPECT_LE(coarse->epsilon_lower, exact * (1 + kSlack));
  EXPECT_GE(coarse->epsilon_upper, exact * (1 - kSlack));
  auto fits = PldEpsilon(*Event::SelfComposed(*Event::Gaussian(1), 10000), delta);
  ASSERT_TRUE(fits.ok()) << fits.error();
  EXPECT_FALSE(fits->grid_coarsened);
}

TEST_P(PldClosedFormTest, DeltaBoundsBracketTheClosedForm) {
  const double sigma = GetParam();
  for (const int64_t steps : {int64_t{100000}, int64_t{1000000}}) {
    const ld mu = std::sqrt(static_cast<ld>(steps)) / sigma;
    const Event event = *Event::SelfComposed(*Event::Gaussian(sigma), steps);
    // Round epsilons near those of delta = 1e-5 and 1e-12.
    for (const double delta : {1e-5, 1e-12}) {
      const double eps = std::round(static_cast<double>(ClosedFormEpsilon(mu, delta)));
      SCOPED_TRACE(testing::Message() << "sigma " << sigma << " T " << steps << " eps " << eps);
      const ld exact = ClosedFormDelta(mu, eps);
      auto bounds = PldDelta(event, eps);
      ASSERT_TRUE(bounds.ok()) << bounds.error();
      EXPECT_LE(bounds->delta_lower, static_cast<double>(exact * (1 + kSlack)));
      EXPECT_GE(bounds->delta_upper, static_cast<double>(exact * (1 - kSlack)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NoiseMultipliers, PldClosedFormTest,
                         testing::Values(0.3, 0.5, 1.0, 2.0, 5.0));

// The issue's command line: `dpkit epsilon --sampling_rate=1 --noise_multiplier=1
// --steps=100000 --delta=1e-5` (a Poisson-sampled step at rate 1), exact 51347.6836.
TEST(PldClosedFormTest, IssueCommandLineBracketsTheClosedForm) {
  const Event step = *Event::PoissonSampled(1.0, *Event::Gaussian(1.0));
  const Event event = *Event::SelfComposed(step, 100000);
  const double exact = static_cast<double>(ClosedFormEpsilon(std::sqrt(1e5L), 1e-5L));
  for (const double tolerance : {1e-4, 1e-6}) {
    PldOptions options;
    options.epsilon_tolerance = tolerance;
    auto bounds = PldEpsilon(event, 1e-5, options);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_lower, exact * (1 + kSlack)) << tolerance;
    EXPECT_GE(bounds->epsilon_upper, exact * (1 - kSlack)) << tolerance;
  }
}

}  // namespace
}  // namespace dpkit::accounting
