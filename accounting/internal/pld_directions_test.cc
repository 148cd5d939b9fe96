#include "dpkit/accounting/internal/pld_directions.h"

#include "dpkit/accounting/event.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

TEST(PldDirectionsTest, PrepareFlattensChoosesTheGridAndSplitsTheTailBudget) {
  const Event event = *DpSgdEvent(0.01, 1.0, 1000);
  auto p = Prepare(event, {1e-4, 0}, 1e-10L);
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->flat.size(), 1u);
  EXPECT_EQ(p->flat[0].second, 1000);
  EXPECT_FALSE(p->symmetric);  // sampled: the add direction differs
  EXPECT_EQ(p->tail, 1e-10L / 1000);
  EXPECT_GT(p->h, 0);
  auto unsampled = Prepare(*Event::Gaussian(1.0), {1e-4, 0.01}, 1e-10L);
  ASSERT_TRUE(unsampled.ok());
  EXPECT_TRUE(unsampled->symmetric);
  EXPECT_EQ(unsampled->h, 0.01);
  EXPECT_FALSE(Prepare(event, {1, 0}, 1e-10L).ok());  // tolerance out of range
}

TEST(PldDirectionsTest, BuildDirectionBuildsEachDirectionOnce) {
  auto p = Prepare(*DpSgdEvent(0.01, 1.0, 1000), {1e-4, 1e-3}, 1e-10L);
  ASSERT_TRUE(p.ok());
  auto remove = BuildDirection(&*p, Direction::kRemove);
  ASSERT_TRUE(remove.ok());
  EXPECT_EQ(*remove, &p->remove);
  ASSERT_EQ(p->remove.size(), 1u);
  EXPECT_EQ(p->remove[0].count, 1000);
  EXPECT_FALSE(p->remove[0].upper.mass.empty());
  EXPECT_EQ(p->remove[0].upper.log_mass.size(), p->remove[0].upper.mass.size());
  EXPECT_TRUE(p->add.empty());
  auto again = BuildDirection(&*p, Direction::kRemove);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(p->remove.size(), 1u);  // not rebuilt
  auto add = BuildDirection(&*p, Direction::kAdd);
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(p->add.size(), 1u);
}

TEST(PldDirectionsTest, SampledCompositionsAreBuiltFromTheirInnerComponents) {
  const Event inner = *Event::Composed({*Event::BoundedRange(0.5), *Event::Gaussian(1.5)});
  auto p = Prepare(*Event::PoissonSampled(0.01, inner), {1e-4, 1e-3}, 1e-10L);
  ASSERT_TRUE(p.ok());
  auto remove = BuildDirection(&*p, Direction::kRemove);
  ASSERT_TRUE(remove.ok()) << remove.error();
  long double total = p->remove[0].upper.infinity_mass;
  for (long double v : p->remove[0].upper.mass) total += v;
  EXPECT_GE(total, 1 - 1e-9L);  // the pessimistic PMF keeps (at least) all the mass
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
