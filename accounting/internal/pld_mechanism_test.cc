#include "dpkit/accounting/internal/pld_mechanism.h"

#include <map>

#include "dpkit/accounting/event.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

TEST(PldMechanismTest, FlattenMultipliesCountsAndNestedSamplingRates) {
  const Event gaussian = *Event::Gaussian(1.5);
  const Event inner = *Event::PoissonSampled(0.5, gaussian);
  const Event event = *Event::SelfComposed(*Event::PoissonSampled(0.1, inner), 20);
  const Event both = *Event::Composed({event, *Event::SelfComposed(gaussian, 3)});
  std::map<Mechanism, double> flat;
  ASSERT_TRUE(Flatten(both, 2.0, 1.0, &flat).ok());
  ASSERT_EQ(flat.size(), 2u);
  const Mechanism sampled{Base::kGaussian, 1.5, 0.1 * 0.5, 0};
  const Mechanism plain{Base::kGaussian, 1.5, 1.0, 0};
  EXPECT_EQ(flat.at(sampled), 40.0);
  EXPECT_EQ(flat.at(plain), 6.0);
}

TEST(PldMechanismTest, FlattenKeepsASampledCompositionAsOneComponent) {
  const Event composed =
      *Event::Composed({*Event::BoundedRange(0.5), *Event::Gaussian(1.5)});
  std::map<Mechanism, double> flat;
  ASSERT_TRUE(Flatten(*Event::PoissonSampled(0.01, composed), 1.0, 1.0, &flat).ok());
  ASSERT_EQ(flat.size(), 1u);
  const Mechanism& m = flat.begin()->first;
  EXPECT_EQ(m.base, Base::kSampledComposition);
  EXPECT_EQ(m.sampling_rate, 0.01);
  EXPECT_EQ(m.inner, composed.ToJsonString());
  // Grid parameter: V = 1/1.5^2 + 0.5^2, min(q^2 (e^V - 1), q (V + V^2/4)) (square root).
  const double v = 1 / 2.25 + 0.25;
  EXPECT_DOUBLE_EQ(m.parameter, std::sqrt(std::min(1e-4 * std::expm1(v), 0.01 * (v + v * v / 4))));
}

TEST(PldMechanismTest, FlattenRefusesWhatThePldAccountantCannotSample) {
  std::map<Mechanism, double> flat;
  EXPECT_FALSE(Flatten(*Event::PoissonSampled(0.1, *Event::PureDp(1)), 1, 1, &flat).ok());
  const Event nested = *Event::Composed(
      {*Event::PoissonSampled(0.1, *Event::Gaussian(1)), *Event::Gaussian(2)});
  const Result<void> r = Flatten(*Event::PoissonSampled(0.1, nested), 1, 1, &flat);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot Poisson-sample a composition"), std::string::npos);
}

TEST(PldMechanismTest, ChooseIntervalFollowsTheToleranceAndKeepsAFixedSpacing) {
  std::map<Mechanism, double> flat;
  flat[{Base::kGaussian, 1.0, 0.01, 0}] = 10000;
  const double h4 = ChooseInterval(flat, {1e-4, 0});
  const double h6 = ChooseInterval(flat, {1e-6, 0});
  // h ~ sqrt(tolerance): 100x smaller tolerance, 10x finer grid (above the 1e-6 floor).
  EXPECT_NEAR(h4 / h6, 10.0, 1e-9);
  EXPECT_EQ(ChooseInterval(flat, {1e-4, 0.003}), 0.003);
  EXPECT_TRUE(CheckGridOptions({1e-4, 0}).ok());
  EXPECT_FALSE(CheckGridOptions({0.2, 0}).ok());
  EXPECT_FALSE(CheckGridOptions({1e-4, 2}).ok());
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
