#include "dpkit/accounting/internal/pld_common.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

TEST(PldCommonTest, GridLimitErrorIsTypedAndStatesThePointsNeeded) {
  const Error e = GridLimitError(5000000, kMaxGridPoints, 1e-3);
  EXPECT_EQ(e.code, ErrorCode::kGridLimit);
  EXPECT_EQ(e.grid_points, 5000000);
  EXPECT_EQ(e.message.rfind("the privacy loss grid would need 5000000 points (limit 2097152)", 0),
            0u)
      << e.message;
  // The kind survives DPKIT_RETURN_IF_ERROR.
  auto forward = [&]() -> Result<int> {
    DPKIT_RETURN_IF_ERROR(Result<void>(e));
    return 1;
  };
  const Result<int> r = forward();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error_value().code, ErrorCode::kGridLimit);
  EXPECT_EQ(r.error_value().grid_points, 5000000);
  EXPECT_EQ(r.error(), e.message);
}

TEST(PldCommonTest, FillLogsMarksEmptyCellsMinusInfinity) {
  Pmf pmf;
  pmf.mass = {0.25L, 0, -1e-30L, 0.75L};
  FillLogs(&pmf);
  ASSERT_EQ(pmf.log_mass.size(), 4u);
  EXPECT_EQ(pmf.log_mass[0], std::log(0.25L));
  EXPECT_TRUE(std::isinf(pmf.log_mass[1]) && pmf.log_mass[1] < 0);
  EXPECT_TRUE(std::isinf(pmf.log_mass[2]) && pmf.log_mass[2] < 0);
  EXPECT_EQ(pmf.log_mass[3], std::log(0.75L));
}

TEST(PldCommonTest, ComponentPmfsSelectsTheBoundsPmf) {
  ComponentPmfs c;
  c.upper.min_index = 1;
  c.lower.min_index = -1;
  EXPECT_EQ(c.of(Bound::kUpper).min_index, 1);
  EXPECT_EQ(c.of(Bound::kLower).min_index, -1);
  EXPECT_TRUE((Query{Query::Kind::kDeltaAtEpsilon, 1}.at_epsilon()));
  EXPECT_FALSE((Query{Query::Kind::kEpsilonAtDelta, 1e-5}.at_epsilon()));
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
