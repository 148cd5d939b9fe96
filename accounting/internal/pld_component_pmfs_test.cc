#include "dpkit/accounting/internal/pld_component_pmfs.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

long double Delta(const Pmf& p, double h, long double eps) {
  long double d = p.infinity_mass;
  for (size_t j = 0; j < p.mass.size(); ++j) {
    const long double l = static_cast<long double>(p.min_index + static_cast<int64_t>(j)) * h;
    if (l > eps) d += p.mass[j] * (1 - std::exp(eps - l));
  }
  return d;
}

// delta(eps) of one Gaussian mechanism with noise multiplier s (Balle, Wang 2018, Thm. 8).
long double GaussianDelta(long double s, long double eps) {
  auto phi = [](long double z) { return 0.5L * std::erfc(-z / std::sqrt(2.0L)); };
  return phi(1 / (2 * s) - eps * s) - std::exp(eps) * phi(-1 / (2 * s) - eps * s);
}

TEST(PldComponentPmfsTest, GaussianPmfsBracketTheExactDeltaCurve) {
  const Mechanism m{Base::kGaussian, 1.3, 1.0, 0};
  const double h = 1e-3;
  Pmf upper, lower, tangent;
  ContinuousPmfOptions options;
  options.lower_alt = &tangent;
  ASSERT_TRUE(BuildContinuousPmfs(m, Direction::kRemove, h, 1e-12L, &upper, &lower, options).ok());
  for (long double eps : {0.0L, 0.3L, 1.0L, 2.5L}) {
    const long double exact = GaussianDelta(1.3L, eps);
    EXPECT_GE(Delta(upper, h, eps), exact);
    EXPECT_LE(Delta(lower, h, eps), exact);
    EXPECT_LE(Delta(tangent, h, eps), exact);
    // Second order in h: both within a relative 1e-5 here.
    EXPECT_LT(Delta(upper, h, eps), exact * (1 + 1e-5L) + 1e-12L);
    EXPECT_GT(Delta(lower, h, eps), exact * (1 - 1e-5L) - 1e-12L);
  }
}

TEST(PldComponentPmfsTest, FixedRangeLeavesTheOutsideMassOut) {
  const Mechanism m{Base::kGaussian, 1.0, 1.0, 0};
  const double h = 1e-2;
  Pmf upper, lower;
  ContinuousPmfOptions options;
  options.lo_fixed = -10;
  options.hi_fixed = 20;
  ASSERT_TRUE(BuildContinuousPmfs(m, Direction::kRemove, h, 1e-12L, &upper, &lower, options).ok());
  EXPECT_EQ(upper.min_index, -10);
  EXPECT_EQ(upper.mass.size(), 31u);
  EXPECT_EQ(upper.infinity_mass, 0);  // the mass above 0.2 belongs to another part
  long double total = 0;
  for (long double v : upper.mass) total += v;
  EXPECT_LT(total, 0.5L);  // the loss N(1/2, 1) has most of its mass outside (-0.1, 0.2]
}

TEST(PldComponentPmfsTest, GridBeyondTheLimitIsATypedError) {
  const Mechanism m{Base::kGaussian, 1.0, 1.0, 0};
  Pmf upper, lower;
  const Result<void> r = BuildContinuousPmfs(m, Direction::kRemove, 1e-7, 1e-12L, &upper, &lower);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error_value().code, ErrorCode::kGridLimit);
  EXPECT_GT(r.error_value().grid_points, kMaxGridPoints);
}

TEST(PldComponentPmfsTest, RandomizedResponseKeepsItsMasses) {
  const Mechanism rr{Base::kRandomizedResponse, 1.0, 1.0, 1e-6};
  Pmf upper, lower;
  BuildRandomizedResponsePmfs(rr, 0.03, &upper, &lower);
  long double up = upper.infinity_mass, low = lower.infinity_mass;
  for (long double v : upper.mass) up += v;
  for (long double v : lower.mass) low += v;
  EXPECT_NEAR(static_cast<double>(up), 1.0, 1e-15);
  EXPECT_NEAR(static_cast<double>(low), 1.0, 1e-15);
  // Above the grid point past eps = 1 (connect-the-dots splits the atom at 1 between 0.99
  // and 1.02) its delta is the atom at +inf; the optimistic PMF rounds the atom down.
  EXPECT_NEAR(static_cast<double>(Delta(upper, 0.03, 1.05L)), 1e-6, 1e-15);
  EXPECT_NEAR(static_cast<double>(Delta(lower, 0.03, 0.995L)), 1e-6, 1e-15);
}

TEST(PldComponentPmfsTest, IsolatedAtomsAreRoundedDownToTheGrid) {
  const Mechanism m{Base::kDiscreteGaussian, 1.0, 1.0, 0, 1};
  Pmf lower;
  ASSERT_TRUE(PlaceLowerAtoms({{0.55L, 0.5L}, {-0.55L, 0.5L}}, m, Direction::kRemove, 0.1,
                              1e-12L, 0.01L, &lower)
                  .ok());
  // 0.55 -> grid point 5 (0.5), -0.55 -> grid point -6 (-0.6).
  EXPECT_EQ(lower.min_index, -6);
  EXPECT_EQ(lower.mass.front(), 0.5L);
  EXPECT_EQ(lower.mass.back(), 0.5L);
  EXPECT_EQ(lower.infinity_mass, 0.01L);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
