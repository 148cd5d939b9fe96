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

TEST(TwoSampleRankChiSquareTest, MatchesHandComputedStatistic) {
  // 9 reference phrases -> 10 positions, 2 bins of 5. Canaries: 3 in bin 0, 1 in bin 1;
  // baseline: 1 in bin 0, 3 in bin 1. Column totals 4 and 4, every expected count 2:
  // statistic 4 * (1^2 / 2) = 2, 1 dof, p = P(chi2_1 > 2) = erfc(1) = 0.1572992.
  auto r = TwoSampleRankChiSquare({0, 1, 4, 7}, {2, 5, 6, 9}, 9, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->statistic, 2.0);
  EXPECT_EQ(r->degrees_of_freedom, 1);
  EXPECT_NEAR(r->p_value, 0.15729920705028513, 1e-12);  // erfc(1)
  // Empty bins do not count: 3 bins of which bin 1 is empty is the 2-bin test again.
  auto three = TwoSampleRankChiSquare({0, 1, 2, 9}, {8, 9, 9, 0}, 11, 3);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->degrees_of_freedom, 1);
  EXPECT_DOUBLE_EQ(three->statistic, 2.0);  // bin 0: 3 vs 1, bin 2: 1 vs 3
}

TEST(TwoSampleRankChiSquareTest, IdenticalSamplesGiveZeroAndBadInputFails) {
  auto r = TwoSampleRankChiSquare({0, 3, 8}, {8, 0, 3}, 9, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->statistic, 0.0);
  EXPECT_DOUBLE_EQ(r->p_value, 1.0);
  EXPECT_FALSE(TwoSampleRankChiSquare({}, {1}, 9, 2).ok());
  EXPECT_FALSE(TwoSampleRankChiSquare({1}, {}, 9, 2).ok());
  EXPECT_FALSE(TwoSampleRankChiSquare({1}, {10}, 9, 2).ok());
  EXPECT_FALSE(TwoSampleRankChiSquare({1}, {1}, 9, 1).ok());
}

TEST(ExposureTest, IsLog2CandidatesOverRank) {
  // Rank 0 of 1023 references: the most likely of 1,024 candidates, exposure 10 bits;
  // the median rank has exposure 1; the last, 0.
  EXPECT_DOUBLE_EQ(Exposure(0, 1023), 10.0);
  EXPECT_DOUBLE_EQ(Exposure(511, 1023), 1.0);
  EXPECT_DOUBLE_EQ(Exposure(1023, 1023), 0.0);
}

TEST(CanaryRankTest, CountsMoreLikelyReferencePhrases) {
  Word2Vec model(4, 2, 1);
  const Phrase canary{0, 1, 2};
  const double own = model.LogPerplexity(std::vector<int32_t>{0, 2}, 1);
  EXPECT_EQ(CanaryRank(model, canary, {own - 1, own + 1, own - 2}), 2);
}

}  // namespace
}  // namespace dpkit::models::wide
