#include "dpkit/models/wide/memorization_audit.h"

#include "gtest/gtest.h"

namespace dpkit::models::wide {
namespace {

TEST(UniformRankChiSquareTest, MatchesHandComputedStatistic) {
  // 9 reference phrases -> 10 positions, 2 bins of 5; ranks: 4 in bin 0, 0 in bin 1.
  auto r = UniformRankChiSquare({0, 1, 2, 4}, 9, 2);
  ASSERT_TRUE(r.ok());
  // expected 2 and 2: (4-2)^2/2 + (0-2)^2/2 = 4, 1 dof: p = P(chi2_1 > 4) = 0.0455003.
  EXPECT_DOUBLE_EQ(r->statistic, 4.0);
  EXPECT_EQ(r->degrees_of_freedom, 1);
  EXPECT_NEAR(r->p_value, 0.04550026389635842, 1e-12);  // erfc(sqrt(2)), published tables
}

TEST(UniformRankChiSquareTest, UniformRanksGiveZeroStatistic) {
  auto r = UniformRankChiSquare({0, 3, 5, 8}, 9, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->statistic, 0.0);
  EXPECT_DOUBLE_EQ(r->p_value, 1.0);
}

TEST(UniformRankChiSquareTest, RejectsBadInput) {
  EXPECT_FALSE(UniformRankChiSquare({}, 9, 2).ok());
  EXPECT_FALSE(UniformRankChiSquare({10}, 9, 2).ok());
  EXPECT_FALSE(UniformRankChiSquare({1}, 9, 1).ok());
}

TEST(CanaryRankTest, CountsMoreLikelyReferencePhrases) {
  Word2Vec model(4, 2, 1);
  const Phrase canary{0, 1, 2};
  const double own = model.LogPerplexity(std::vector<int32_t>{0, 2}, 1);
  EXPECT_EQ(CanaryRank(model, canary, {own - 1, own + 1, own - 2}), 2);
}

}  // namespace
}  // namespace dpkit::models::wide
