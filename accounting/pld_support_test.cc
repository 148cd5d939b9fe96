// Issue 21 (soundness 3, PLD part): with a tiny sampling rate and many steps, the composed
// window's far end holds only rounding noise, which the pessimistic bound used to count as
// mass (the per-entry FFT error bound untilted by e^{K - lambda l}); pld.cc (4), "Support".
// Each PLD upper bound below is certified, so it can be compared with any other certified
// upper bound: the RDP values quoted are those of `dpkit epsilon --accountant=rdp` for the
// same settings (issue 21).
#include <cmath>
#include <cstdint>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

Event DpSgd(double sampling_rate, double sigma, int64_t steps) {
  return *Event::SelfComposed(*Event::PoissonSampled(sampling_rate, *Event::Gaussian(sigma)),
                              steps);
}

// q 1e-6, sigma 0.3, T 1e7, delta 0.1: PLD certified 8.70 where RDP certifies 0.58 (the
// first stage's window reached 120 below the least possible loss; its upper PMF had total
// mass 4e16). Now 0.236.
TEST(PldSupportTest, TinySamplingRateUpperBoundIsBelowRdp) {
  auto bounds = PldEpsilon(DpSgd(1e-6, 0.3, 10000000), 0.1);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
  EXPECT_LE(bounds->epsilon_upper, 0.58);
}

// q 1e-6, sigma 0.5, T 1e7, delta 1e-15: PLD returned +inf where RDP certifies 5.43. Now 4.30.
TEST(PldSupportTest, TinySamplingRateTinyDeltaIsFiniteAndBelowRdp) {
  auto bounds = PldEpsilon(DpSgd(1e-6, 0.5, 10000000), 1e-15);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
  EXPECT_LE(bounds->epsilon_upper, 5.43);
}

// q 1e-4, sigma 1, T 1e7, delta 1e-15: both directions' upper bounds are close (3.2469 and
// 3.2488); when the support rule made the add direction the larger one, its lower bound was
// 0 and so was the reported one. The other direction's lower bound is used then (3.2257).
TEST(PldSupportTest, LowerBoundSurvivesAChangeOfDominantDirection) {
  auto bounds = PldEpsilon(DpSgd(1e-4, 1.0, 10000000), 1e-15);
  ASSERT_TRUE(bounds.ok()) << bounds.error();
  EXPECT_LE(bounds->epsilon_lower, bounds->epsilon_upper);
  EXPECT_GE(bounds->epsilon_lower, 0.99 * bounds->epsilon_upper);
}

// More noise never costs privacy; the upper bounds (q 1e-4, T 10, delta 1e-15) were 6.96e-5
// at sigma 30 and 8.21e-5 at sigma 100 (now 6.89e-5 and 5.26e-5), and 7.33e-5 at sigma 200
// (now 3.25e-5).
TEST(PldSupportTest, MoreNoiseGivesASmallerUpperBoundAtTinyEpsilon) {
  double previous = INFINITY;
  for (const double sigma : {30.0, 100.0, 200.0}) {
    auto bounds = PldEpsilon(DpSgd(1e-4, sigma, 10), 1e-15);
    ASSERT_TRUE(bounds.ok()) << bounds.error();
    EXPECT_LE(bounds->epsilon_upper, previous) << sigma;
    previous = bounds->epsilon_upper;
  }
}

}  // namespace
}  // namespace dpkit::accounting
