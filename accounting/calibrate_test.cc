#include "accounting/calibrate.h"

#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

// The returned sigma must meet the target when re-accounted, and sigma * (1 - 0.1 %)
// must not (within 0.1 % of the smallest satisfying sigma).
TEST(CalibrateTest, PldNoiseMeetsTargetAndIsNearlySmallest) {
  const double q = 256.0 / 60000, delta = 1e-5;
  const int64_t steps = 2000;
  auto c = CalibrateNoiseMultiplier(2.0, delta, q, steps, Accountant::kPld);
  ASSERT_TRUE(c.ok()) << c.error();
  auto again = DpSgdEpsilon(q, c->noise_multiplier, steps, delta, Accountant::kPld);
  ASSERT_TRUE(again.ok());
  EXPECT_LE(*again, 2.0);
  EXPECT_EQ(*again, c->epsilon);
  auto smaller = DpSgdEpsilon(q, c->noise_multiplier * (1 - 1e-3), steps, delta,
                              Accountant::kPld);
  ASSERT_TRUE(smaller.ok());
  EXPECT_GT(*smaller, 2.0);
}

TEST(CalibrateTest, RdpNeedsMoreNoiseThanPld) {
  auto pld = CalibrateNoiseMultiplier(1.0, 1e-5, 0.01, 1000, Accountant::kPld);
  auto rdp = CalibrateNoiseMultiplier(1.0, 1e-5, 0.01, 1000, Accountant::kRdp);
  ASSERT_TRUE(pld.ok()) << pld.error();
  ASSERT_TRUE(rdp.ok()) << rdp.error();
  EXPECT_LT(pld->noise_multiplier, rdp->noise_multiplier);
  EXPECT_LE(rdp->epsilon, 1.0);
}

TEST(CalibrateTest, LargestStepsIsTheLastStepWithinBudget) {
  auto t = LargestSteps(1.0, 1e-5, 0.01, 1.0, 100000, Accountant::kRdp);
  ASSERT_TRUE(t.ok()) << t.error();
  ASSERT_GT(*t, 0);
  EXPECT_LE(*DpSgdEpsilon(0.01, 1.0, *t, 1e-5, Accountant::kRdp), 1.0);
  EXPECT_GT(*DpSgdEpsilon(0.01, 1.0, *t + 1, 1e-5, Accountant::kRdp), 1.0);
}

TEST(CalibrateTest, RejectsBadInput) {
  EXPECT_FALSE(CalibrateNoiseMultiplier(0, 1e-5, 0.01, 10, Accountant::kPld).ok());
  EXPECT_FALSE(CalibrateNoiseMultiplier(1, 0, 0.01, 10, Accountant::kPld).ok());
  EXPECT_FALSE(CalibrateNoiseMultiplier(1, 1e-5, 1.5, 10, Accountant::kPld).ok());
  EXPECT_FALSE(CalibrateNoiseMultiplier(1, 1e-5, 0.01, 0, Accountant::kPld).ok());
}

}  // namespace
}  // namespace dpkit::accounting
