#include "dpkit/accounting/calibrate_search.h"

#include <cmath>
#include <limits>
#include <optional>

#include "gtest/gtest.h"

namespace dpkit::accounting::calibrate_internal {
namespace {

// A synthetic accountant: exact epsilon = c * x^p (p < 0 for a noise multiplier, > 0 for
// a rate or a number of steps); the fine bounds lie within 1e-5 of it, the coarse ones
// within 1e-3 and are skewed (upper 3e-4 above, lower 7e-4 below), like the PLD's.
struct Synthetic {
  double c, p;
  int fine_calls = 0, coarse_calls = 0;
  double Exact(double x) const { return c * std::pow(x, p); }
  IntervalAt Eval() {
    return [this](double x, bool fine) -> Result<EpsilonInterval> {
      const double e = Exact(x);
      if (fine) {
        ++fine_calls;
        return EpsilonInterval{e * (1 + 1e-5), e * (1 - 1e-5)};
      }
      ++coarse_calls;
      return EpsilonInterval{e * (1 + 3e-4), e * (1 - 7e-4)};
    };
  }
};

// The returned x is good (fine upper <= target) and x one width further is bad.
void ExpectCertifiedAndOptimal(const Synthetic& s, const SearchSpec& spec,
                               const SearchPoint& found) {
  EXPECT_LE(found.epsilon, spec.target);
  EXPECT_EQ(found.epsilon, s.Exact(found.x) * (1 + 1e-5));
  const double further = spec.integer ? (spec.good_is_large ? found.x - 1 : found.x + 1)
                                      : (spec.good_is_large
                                             ? found.x / (1 + spec.relative_width)
                                             : found.x * (1 + spec.relative_width));
  EXPECT_GT(s.Exact(further) * (1 + 1e-5), spec.target) << "x " << found.x;
}

TEST(ModelSearchTest, NoiseLikeBoundaryInFewFineEvaluations) {
  Synthetic s{2.4, -1.6};
  // Start 8 % below the boundary with a slope hint 20 % off.
  SearchSpec spec{2.0, 1.05, 1e-3, 1e4, /*good_is_large=*/true, /*integer=*/false, 5e-4,
                  -1.3};
  auto found = ModelSearch(s.Eval(), spec);
  ASSERT_TRUE(found.ok()) << found.error();
  ASSERT_TRUE(found->has_value());
  ExpectCertifiedAndOptimal(s, spec, **found);
  EXPECT_LE(s.fine_calls, 3);
  EXPECT_LE(s.coarse_calls, 4);
}

TEST(ModelSearchTest, RateLikeBoundaryWithoutHint) {
  Synthetic s{40.0, 0.9};
  SearchSpec spec{1.5, 0.5, 1e-12, 1.0, /*good_is_large=*/false, /*integer=*/false, 5e-4};
  auto found = ModelSearch(s.Eval(), spec);
  ASSERT_TRUE(found.ok()) << found.error();
  ASSERT_TRUE(found->has_value());
  ExpectCertifiedAndOptimal(s, spec, **found);
  EXPECT_LE(s.fine_calls, 4);
}

TEST(ModelSearchTest, StepsLikeIntegerBoundary) {
  Synthetic s{0.02, 0.5};  // epsilon 2 at x = 10^4
  SearchSpec spec{2.0, 9000, 1, 1e9, /*good_is_large=*/false, /*integer=*/true, 5e-4, 0.45};
  auto found = ModelSearch(s.Eval(), spec);
  ASSERT_TRUE(found.ok()) << found.error();
  ASSERT_TRUE(found->has_value());
  ExpectCertifiedAndOptimal(s, spec, **found);
  EXPECT_EQ(found->value().x, std::floor(found->value().x));
  EXPECT_LE(s.fine_calls, 4);
}

TEST(ModelSearchTest, MisleadingCoarseBoundsCostOnlyAFewMoreEvaluations) {
  // Valid but skewed coarse bounds (upper 6 % above, so the estimate is 4 % too high) and a
  // slope hint of the wrong size: the search still ends at the boundary.
  Synthetic s{2.4, -1.6};
  IntervalAt eval = [&s](double x, bool fine) -> Result<EpsilonInterval> {
    const double e = s.Exact(x);
    if (fine) return EpsilonInterval{e * (1 + 1e-5), e * (1 - 1e-5)};
    return EpsilonInterval{e * 1.06, e * (1 - 1e-3)};
  };
  SearchSpec spec{2.0, 1.3, 1e-3, 1e4, /*good_is_large=*/true, /*integer=*/false, 5e-4,
                  -0.2};
  auto found = ModelSearch(eval, spec);
  ASSERT_TRUE(found.ok()) << found.error();
  ASSERT_TRUE(found->has_value());
  ExpectCertifiedAndOptimal(s, spec, **found);
}

TEST(ModelSearchTest, LimitsOfTheRange) {
  // Good everywhere: the bad-side limit itself.
  Synthetic loose{0.1, 0.5};
  SearchSpec rate{1.0, 0.3, 1e-12, 1.0, /*good_is_large=*/false, /*integer=*/false, 5e-4};
  auto all = ModelSearch(loose.Eval(), rate);
  ASSERT_TRUE(all.ok());
  ASSERT_TRUE(all->has_value());
  EXPECT_EQ(all->value().x, 1.0);
  // Bad everywhere: none.
  Synthetic tight{1e9, 0.5};
  auto none = ModelSearch(tight.Eval(), rate);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // Integer: even x = 1 is bad.
  SearchSpec steps{1.0, 5, 1, 100, /*good_is_large=*/false, /*integer=*/true, 5e-4};
  auto no_step = ModelSearch(tight.Eval(), steps);
  ASSERT_TRUE(no_step.ok());
  EXPECT_FALSE(no_step->has_value());
  // Integer: the largest x is good (epsilon 1 < 2 at x = 100).
  steps.target = 2.0;
  auto max_steps = ModelSearch(loose.Eval(), steps);
  ASSERT_TRUE(max_steps.ok());
  ASSERT_TRUE(max_steps->has_value());
  EXPECT_EQ(max_steps->value().x, 100);
}

TEST(ModelSearchTest, InfiniteEpsilonAndErrorsAreHandled) {
  // epsilon +inf below x = 0.5 (e.g. too many steps), c x^-1 above.
  int calls = 0;
  IntervalAt eval = [&calls](double x, bool) -> Result<EpsilonInterval> {
    ++calls;
    if (x < 0.5) {
      const double inf = std::numeric_limits<double>::infinity();
      return EpsilonInterval{inf, inf};
    }
    return EpsilonInterval{3.0 / x, 3.0 / x};
  };
  SearchSpec spec{2.0, 1e-3, 1e-3, 1e4, /*good_is_large=*/true, /*integer=*/false, 5e-4};
  auto found = ModelSearch(eval, spec);
  ASSERT_TRUE(found.ok()) << found.error();
  ASSERT_TRUE(found->has_value());
  EXPECT_LE(found->value().epsilon, 2.0);
  EXPECT_GT(3.0 / (found->value().x / (1 + 5e-4)), 2.0);
  IntervalAt failing = [](double, bool) -> Result<EpsilonInterval> { return Error{"boom"}; };
  auto error = ModelSearch(failing, spec);
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.error(), "boom");
}

}  // namespace
}  // namespace dpkit::accounting::calibrate_internal
