#include "dpkit/accounting/internal/pld_staged_composition.h"

#include <cmath>
#include <vector>

#include "dpkit/accounting/internal/pld_component_pmfs.h"
#include "dpkit/accounting/internal/pld_delta_curve.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

long double GdpDelta(long double mu, long double eps) {
  auto phi = [](long double z) { return 0.5L * std::erfc(-z / std::sqrt(2.0L)); };
  return phi(-eps / mu + mu / 2) - std::exp(eps) * phi(-eps / mu - mu / 2);
}

TEST(PldStagedCompositionTest, FloorDivRoundsTowardsMinusInfinity) {
  EXPECT_EQ(FloorDiv(7, 2), 3);
  EXPECT_EQ(FloorDiv(-7, 2), -4);
  EXPECT_EQ(FloorDiv(-8, 2), -4);
  EXPECT_EQ(FloorDiv(0, 3), 0);
}

TEST(PldStagedCompositionTest, PlansTwoStagesOnlyForOneComponentUsedOften) {
  std::vector<ComponentPmfs> comps(1);
  comps[0].lower.mass = {1};
  comps[0].count = 1e6;
  const auto plan = PlanStages(comps, StagingRule::kStepsOnly, 1e-4);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->t1, 1000);
  EXPECT_EQ(plan->k, 15);  // floor(sqrt(1000) / 2)
  comps[0].count = 1e5;  // below kStagedSteps: only the deficit rule, and no deficit
  EXPECT_FALSE(PlanStages(comps, StagingRule::kWithDeficit, 1e-4).has_value());
  comps[0].lower.mass = {0.99};  // deficit 0.01: T eta = 1000 > 100 tolerance
  EXPECT_TRUE(PlanStages(comps, StagingRule::kWithDeficit, 1e-4).has_value());
  EXPECT_FALSE(PlanStages(comps, StagingRule::kStepsOnly, 1e-4).has_value());
  comps.push_back(comps[0]);
  EXPECT_FALSE(PlanStages(comps, StagingRule::kWithDeficit, 1e-4).has_value());
}

TEST(PldStagedCompositionTest, TwoStagesBracketTheExactDelta) {
  // T = 4e5 uses of a Gaussian with noise multiplier 400: mu = sqrt(T)/400 ~ 1.58.
  const double h = 2e-4, sigma = 400, count = 4e5;
  std::vector<ComponentPmfs> comps(1);
  const Mechanism m{Base::kGaussian, sigma, 1.0, 0};
  ASSERT_TRUE(BuildContinuousPmfs(m, Direction::kRemove, h, 1e-18L, &comps[0].upper,
                                  &comps[0].lower)
                  .ok());
  FillLogs(&comps[0].upper);
  FillLogs(&comps[0].lower);
  comps[0].count = count;
  const auto plan = PlanStages(comps, StagingRule::kWithDeficit, 1e-4);
  ASSERT_TRUE(plan.has_value());
  RealFft fft;
  int64_t points = 0;
  const Query query{Query::Kind::kDeltaAtEpsilon, 1.0};
  auto up = ComposeStaged(comps, Bound::kUpper, h, query, 1e-4, *plan, &fft, &points);
  auto lo = ComposeStaged(comps, Bound::kLower, h, query, 1e-4, *plan, &fft, &points);
  ASSERT_TRUE(up.ok() && lo.ok());
  EXPECT_GT(points, 0);
  const long double exact = GdpDelta(std::sqrt(count) / sigma, 1.0L);
  const long double d_up = DeltaAt(MakeCurve(*up, Bound::kUpper), 1.0L);
  const long double d_lo = DeltaAt(MakeCurve(*lo, Bound::kLower), 1.0L);
  EXPECT_GE(d_up, exact);
  EXPECT_LE(d_lo, exact);
  // Within 1 %: the second stage's grid (k h = 2.4e-3) is coarse, and at the default
  // tolerance the driver refines the grid where the gap shows it.
  EXPECT_LT(d_up / exact, 1 + 1e-2L);
  EXPECT_GT(d_lo / exact, 1 - 1e-2L);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
