#include "dpkit/accounting/internal/pld_search.h"

#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

TEST(PldSearchTest, BisectBracketsTheBoundaryOfARealPredicate) {
  int calls = 0;
  const Bracket<double> b = Bisect<double>(
      0.0, 4.0,
      [&](double x) {
        ++calls;
        return x * x >= 2;
      },
      [](double lo, double hi) { return hi - lo <= 1e-12; }, 200);
  EXPECT_LT(b.lo, std::sqrt(2.0));
  EXPECT_GE(b.hi, std::sqrt(2.0));
  EXPECT_LE(b.hi - b.lo, 1e-12);
  // Halving from width 4 to 1e-12 takes ceil(log2(4e12)) = 42 steps; the ends are never
  // evaluated.
  EXPECT_EQ(calls, 42);
}

TEST(PldSearchTest, BisectStopsAfterTheIterationBudget) {
  int calls = 0;
  const Bracket<double> b = Bisect<double>(
      1.0, 2.0,
      [&](double) {
        ++calls;
        return true;
      },
      [](double, double) { return false; }, 5);
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(b.lo, 1.0);
  EXPECT_EQ(b.hi, 1.0 + 1.0 / 32);
}

TEST(PldSearchTest, IntegerBisectUsesTheOverflowFreeMidpoint) {
  // The largest index with f(i) <= 10 for f(i) = i^2 on [-1000, 1000]: the boundary of the
  // predicate "f(mid) > 10" (true above) is between 3 and 4.
  const Bracket<int64_t> b = Bisect<int64_t>(
      0, 1000, [](int64_t mid) { return mid * mid > 10; },
      [](int64_t lo, int64_t hi) { return hi - lo <= 1; });
  EXPECT_EQ(b.lo, 3);
  EXPECT_EQ(b.hi, 4);
  // Near the int64 range the midpoint lo + (hi - lo) / 2 does not overflow.
  const int64_t big = int64_t{1} << 62;
  const Bracket<int64_t> far = Bisect<int64_t>(
      big, 2 * (big - 1) + 1, [&](int64_t mid) { return mid > big + 7; },
      [](int64_t lo, int64_t hi) { return hi - lo <= 1; });
  EXPECT_EQ(far.lo, big + 7);
  EXPECT_EQ(far.hi, big + 8);
}

TEST(PldSearchTest, GoldenSectionFindsTheMinimumOfAUnimodalFunction) {
  // 40 steps shrink the bracket by 0.618^40 ~ 4e-9 of its width.
  const long double t = GoldenSectionMinimum<long double>(
      0.0L, 10.0L, [](long double x) { return (x - 3.3L) * (x - 3.3L) + 1; }, 40);
  EXPECT_NEAR(static_cast<double>(t), 3.3, 1e-7);
  const double edge = GoldenSectionMinimum<double>(
      0.0, 1.0, [](double x) { return x; }, 40);  // minimum at the left end
  EXPECT_LT(edge, 1e-7);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
