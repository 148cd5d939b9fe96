#include "dpkit/accounting/internal/pld_decomposed.h"

#include <cmath>
#include <limits>
#include <optional>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_direct_delta_testing.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

TEST(PldDecomposedTest, ConvolveDirectIsExactOnSmallPmfs) {
  Pmf a, b;
  a.min_index = -1;
  a.mass = {0.25L, 0.75L};  // at -1, 0 (spacing H)
  b.min_index = 1;
  b.mass = {0.5L, 0.5L};  // at 1, 2 on the grid r H = 2 H: losses 2 H, 4 H
  auto c = ConvolveDirect(a, b, 2, Bound::kUpper);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->min_index, -1 + 2);
  // Entries at 1, 2, 3, 4 (H units): 0.125, 0.375, 0.125, 0.375 (rounded up a little).
  ASSERT_EQ(c->mass.size(), 4u);
  const long double want[] = {0.125L, 0.375L, 0.125L, 0.375L};
  for (int i = 0; i < 4; ++i) {
    EXPECT_GE(c->mass[i], want[i]);
    EXPECT_NEAR(static_cast<double>(c->mass[i]), static_cast<double>(want[i]), 1e-15);
  }
  auto lower = ConvolveDirect(a, b, 2, Bound::kLower);
  ASSERT_TRUE(lower.ok());
  for (int i = 0; i < 4; ++i) EXPECT_LE(lower->mass[i], want[i]);
}

// Upper: a pair with either draw at +inf is at +inf (issue 21: the tail's powers were
// composed with the lower bound's rule, which drops it).
TEST(PldDecomposedTest, ConvolveDirectUpperKeepsTheMassAtInfinity) {
  Pmf a, b;
  a.min_index = 0;
  a.mass = {0.9L};
  a.infinity_mass = 0.1L;
  b.min_index = 0;
  b.mass = {0.8L};
  b.infinity_mass = 0.2L;
  auto upper = ConvolveDirect(a, b, 1, Bound::kUpper);
  ASSERT_TRUE(upper.ok());
  EXPECT_GE(upper->infinity_mass, 1 - 0.9L * 0.8L);
  auto lower = ConvolveDirect(a, b, 1, Bound::kLower);
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(lower->infinity_mass, 0);
}

// The final composition's fallback grid (issue 21: q 1e-6, sigma 0.3, T 1e7 needed 4.22M
// points on the block grid; on twice its spacing the decomposed bounds give [14.78, 16.52]
// where there was no lower bound and an upper bound of 18.77).
TEST(PldDecomposedTest, CoarseningKeepsTheMassAndBracketsTheDeltaCurve) {
  Pmf fine;
  fine.min_index = -7;
  for (int i = 0; i < 23; ++i) fine.mass.push_back(0.01L * (1 + (i * 7) % 5));
  fine.infinity_mass = 0.003L;
  const double h = 0.05;
  for (const int64_t f : {1, 2, 4, 8, 16}) {
    const Pmf up = CoarsenByFactor(fine, f, Bound::kUpper);
    const Pmf down = CoarsenByFactor(fine, f, Bound::kLower);
    // Upper: every atom moved up (index ceil(i / f)), lower: down (floor(i / f)).
    EXPECT_EQ(up.min_index, static_cast<int64_t>(std::ceil(-7.0 / static_cast<double>(f))));
    EXPECT_EQ(down.min_index, static_cast<int64_t>(std::floor(-7.0 / static_cast<double>(f))));
    long double total = 0, total_up = 0, total_down = 0;
    for (const long double v : fine.mass) total += v;
    for (const long double v : up.mass) total_up += v;
    for (const long double v : down.mass) total_down += v;
    EXPECT_GE(total_up, total);
    EXPECT_LE(total_down, total);
    EXPECT_NEAR(static_cast<double>(total_up), static_cast<double>(total), 1e-15);
    EXPECT_NEAR(static_cast<double>(total_down), static_cast<double>(total), 1e-15);
    EXPECT_GE(up.infinity_mass, fine.infinity_mass);
    EXPECT_EQ(down.infinity_mass, fine.infinity_mass);
    ASSERT_EQ(up.log_mass.size(), up.mass.size());
    for (const double epsilon : {-0.5, 0.0, 0.1, 0.25, 0.4, 0.7}) {
      const long double exact = DirectDeltaForTesting(fine, h, epsilon);
      const double coarse_h = h * static_cast<double>(f);
      EXPECT_GE(DirectDeltaForTesting(up, coarse_h, epsilon), exact) << f << " " << epsilon;
      EXPECT_LE(DirectDeltaForTesting(down, coarse_h, epsilon), exact) << f << " " << epsilon;
    }
  }
}

TEST(PldDecomposedTest, DoesNotApplyToOtherEventsOrFewUses) {
  const Query query{Query::Kind::kEpsilonAtDelta, 1e-5};
  const ld inf = std::numeric_limits<ld>::infinity();
  auto few = DecomposedBoundsForEvent(*Event::SelfComposed(*Event::Gaussian(1), 8), {1e-4, 1e-3},
                                      1e-12L, Direction::kRemove, {Bound::kLower}, query, inf);
  ASSERT_TRUE(few.ok());
  EXPECT_FALSE(few->has_value());
  auto two = DecomposedBoundsForEvent(
      *Event::Composed({*Event::Gaussian(1), *Event::Gaussian(2)}), {1e-4, 1e-3}, 1e-12L,
      Direction::kRemove, {Bound::kLower}, query, inf);
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two->has_value());
}

TEST(PldDecomposedTest, SkipsATailGridOverItsCostLimit) {
  // Issue 21: q = 1e-6, sigma = 0.5, T = 1000, delta = 1e-15 (the driver's grid 3.16e-5 and
  // tail budget delta 1e-7) needs about 1.2M tail cells; the decomposition built them for
  // seconds and certified nothing. It is now refused before any PMF is built.
  const Query query{Query::Kind::kEpsilonAtDelta, 1e-15};
  auto r = DecomposedBoundsForEvent(*DpSgdEvent(1e-6, 0.5, 1000), {1e-4, 3.16228e-5}, 1e-22L,
                                    Direction::kRemove, {Bound::kLower, Bound::kUpper}, query,
                                    std::numeric_limits<ld>::infinity());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->has_value());
}

TEST(PldDecomposedTest, BoundsBracketTheComposedGaussian) {
  // 400 uses of a Gaussian with noise multiplier 4 (exactly mu-GDP with mu = 5, Dong,
  // Roth, Su 2019, Cor. 3.3): the decomposition's bounds are ordered and within 1 % (the
  // end-to-end pld_test compares them with the closed form).
  const Query query{Query::Kind::kEpsilonAtDelta, 1e-10};
  auto r = DecomposedBoundsForEvent(*Event::SelfComposed(*Event::Gaussian(4), 400),
                                    {1e-4, 1e-3}, 1e-17L, Direction::kRemove,
                                    {Bound::kLower, Bound::kUpper}, query,
                                    std::numeric_limits<ld>::infinity());
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->has_value());
  const DecomposedResults& d = **r;
  ASSERT_TRUE(d.lower.ok() && d.lower->has_value());
  ASSERT_TRUE(d.upper.ok() && d.upper->has_value());
  EXPECT_LE(**d.lower, **d.upper);
  EXPECT_GT(**d.lower, **d.upper * 0.99L);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
