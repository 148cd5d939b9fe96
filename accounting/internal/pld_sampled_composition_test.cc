#include "dpkit/accounting/internal/pld_sampled_composition.h"

#include <cmath>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_component_pmfs.h"
#include "dpkit/accounting/internal/pld_direct_delta_testing.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

constexpr auto& Delta = DirectDeltaForTesting;

// Poisson sampling of a "composition" of one Gaussian is the Poisson-sampled Gaussian:
// both are built from the same loss law (Zhu, Dong, Wang 2022, Sec. 5), one from its exact
// tails, the other from the inner PMFs, so their certified curves must overlap.
TEST(PldSampledCompositionTest, OneInnerGaussianAgreesWithTheSampledGaussian) {
  const double h = 2e-3, q = 0.05, sigma = 1.2;
  const Mechanism inner{Base::kGaussian, sigma, 1.0, 0};
  for (Direction dir : {Direction::kRemove, Direction::kAdd}) {
    std::vector<ComponentPmfs> pmfs(1);
    ASSERT_TRUE(
        BuildContinuousPmfs(inner, dir, h, 1e-14L, &pmfs[0].upper, &pmfs[0].lower).ok());
    pmfs[0].count = 1;
    const std::vector<std::pair<Mechanism, double>> flat = {{inner, 1.0}};
    Mechanism sampled{Base::kSampledComposition, 0.1, q, 0};
    Pmf upper, lower;
    ASSERT_TRUE(BuildSampledCompositionPmfs(sampled, dir, h, 1e-14L,
                                            InnerComposition{flat, pmfs}, &upper, &lower)
                    .ok());
    const Mechanism direct{Base::kGaussian, sigma, q, 0};
    Pmf d_upper, d_lower;
    ASSERT_TRUE(BuildContinuousPmfs(direct, dir, h, 1e-14L, &d_upper, &d_lower).ok());
    for (long double eps : {0.0L, 0.02L, 0.1L, 0.3L}) {
      // Each certified upper curve is above each certified lower curve.
      EXPECT_GE(Delta(upper, h, eps), Delta(d_lower, h, eps) * (1 - 1e-12L));
      EXPECT_GE(Delta(d_upper, h, eps), Delta(lower, h, eps) * (1 - 1e-12L));
      // And both are tight: within 2 % of each other.
      EXPECT_LT(Delta(upper, h, eps), Delta(d_upper, h, eps) * 1.02L + 1e-12L);
      EXPECT_GT(Delta(lower, h, eps), Delta(d_lower, h, eps) * 0.98L - 1e-12L);
    }
  }
}

TEST(PldSampledCompositionTest, RefusesMoreThanAMillionInnerUses) {
  const Mechanism inner{Base::kGaussian, 1.0, 1.0, 0};
  std::vector<ComponentPmfs> pmfs(1);
  pmfs[0].upper.mass = {1};
  pmfs[0].lower.mass = {1};
  pmfs[0].count = 2e6;
  const std::vector<std::pair<Mechanism, double>> flat = {{inner, 2e6}};
  Pmf upper, lower;
  const Result<void> r =
      BuildSampledCompositionPmfs({Base::kSampledComposition, 1, 0.1, 0}, Direction::kRemove,
                                  0.01, 1e-12L, InnerComposition{flat, pmfs}, &upper, &lower);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("more than 1e6"), std::string::npos);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
