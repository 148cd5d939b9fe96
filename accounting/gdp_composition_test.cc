#include "dpkit/accounting/gdp_composition.h"

#include <cmath>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/gdp.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

TEST(GdpCompositionTest, GaussianIsExactlyOneOverSigmaGdp) {
  auto mu = GdpMuOfEvent(*Event::Gaussian(2.0));
  ASSERT_TRUE(mu.ok()) << mu.error();
  EXPECT_EQ(mu->mu, 0.5);
  EXPECT_FALSE(mu->approximate);
}

TEST(GdpCompositionTest, CompositionAddsMuInQuadrature) {
  // Dong, Roth, Su 2019, Cor. 3.3: T Gaussians of sigma compose to sqrt(T)/sigma.
  auto run = Event::SelfComposed(*Event::Gaussian(4.0), 16);
  auto both = Event::Composed({*run, *Event::Gaussian(1.0)});
  auto mu = GdpMuOfEvent(*both);
  ASSERT_TRUE(mu.ok()) << mu.error();
  EXPECT_DOUBLE_EQ(mu->mu, std::sqrt(1.0 + 1.0));
  EXPECT_FALSE(mu->approximate);
}

TEST(GdpCompositionTest, SampledGaussianIsTheCltApproximation) {
  // Bu et al. 2020, eq. (3.1): mu_CLT = p sqrt(T (e^{1/sigma^2} - 1)).
  auto event = DpSgdEvent(256.0 / 60000, 1.1, 14063);
  auto mu = GdpMuOfEvent(*event);
  ASSERT_TRUE(mu.ok()) << mu.error();
  EXPECT_TRUE(mu->approximate);
  EXPECT_NEAR(mu->mu, *CltMu(256.0 / 60000, 1.1, 14063), 1e-12);
}

TEST(GdpCompositionTest, RateOneSamplingIsExact) {
  auto event = DpSgdEvent(1.0, 2.0, 4);
  auto mu = GdpMuOfEvent(*event);
  ASSERT_TRUE(mu.ok()) << mu.error();
  EXPECT_FALSE(mu->approximate);
  EXPECT_DOUBLE_EQ(mu->mu, 1.0);
}

TEST(GdpCompositionTest, RejectsEventsWithoutMu) {
  auto mu = GdpMuOfEvent(*Event::Laplace(1.0));
  ASSERT_FALSE(mu.ok());
  EXPECT_NE(mu.error().find("not laplace"), std::string::npos) << mu.error();
}

TEST(GdpCompositionTest, RejectsOverflowingMu) {
  auto mu = GdpMuOfEvent(*Event::Gaussian(1e-310));
  ASSERT_FALSE(mu.ok());
  EXPECT_NE(mu.error().find("overflows"), std::string::npos) << mu.error();
}

}  // namespace
}  // namespace dpkit::accounting
