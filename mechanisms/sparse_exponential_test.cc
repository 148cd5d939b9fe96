#include "dpkit/mechanisms/sparse_exponential.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit::mechanisms {
namespace {

// Every chi-square test below fails with probability <= 1e-6 when the sampler is correct
// (critical value at alpha = 1e-6; fixed seeds make each run reproducible).
constexpr double kAlpha = 1e-6;


// Exact probabilities of ordered k-tuples under k rounds of the exponential mechanism
// without replacement (peeling; McSherry & Talwar 2007, each round), by enumeration:
// P(i1,...,ik) = prod_j w(i_j) / (sum of w over rows not yet chosen), w = exp(eps0 u / (2Δ)).
void PeelingProbabilities(const std::vector<double>& weights, int k, std::vector<int>& prefix,
                          double probability, std::map<std::vector<int>, double>& out) {
  if (static_cast<int>(prefix.size()) == k) {
    out[prefix] = probability;
    return;
  }
  const std::set<int> used(prefix.begin(), prefix.end());
  double remaining = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!used.count(static_cast<int>(i))) remaining += weights[i];
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (used.count(static_cast<int>(i))) continue;
    prefix.push_back(static_cast<int>(i));
    PeelingProbabilities(weights, k, prefix, probability * weights[i] / remaining, out);
    prefix.pop_back();
  }
}

// Draws `trials` selections and compares the ordered outcomes with peeling (chi-square).
void ExpectMatchesPeeling(const SparseScores& scores, int k, double epsilon, double sensitivity,
                          int trials, uint64_t seed) {
  auto mechanism = SparseExponentialTopK::Create(k, epsilon, sensitivity);
  ASSERT_TRUE(mechanism.ok()) << mechanism.status();
  std::vector<double> weights(static_cast<size_t>(scores.num_rows), 1.0);  // score 0: e^0
  for (size_t i = 0; i < scores.rows.size(); ++i) {
    weights[static_cast<size_t>(scores.rows[i])] =
        std::exp(epsilon / k * scores.scores[i] / (2 * sensitivity));
  }
  std::map<std::vector<int>, double> expected;
  std::vector<int> prefix;
  PeelingProbabilities(weights, k, prefix, 1.0, expected);
  std::map<std::vector<int>, double> observed;
  SeededRandomGeneratorForTesting rng(seed);
  for (int t = 0; t < trials; ++t) {
    auto selected = mechanism->Select(scores, rng);
    ASSERT_TRUE(selected.ok()) << selected.status();
    ASSERT_EQ(selected->size(), static_cast<size_t>(k));
    std::vector<int> key(selected->begin(), selected->end());
    ASSERT_TRUE(expected.count(key)) << "impossible outcome";
    observed[key] += 1;
  }
  std::vector<double> obs, exp;
  for (const auto& [key, p] : expected) {
    obs.push_back(observed[key]);
    exp.push_back(p * trials);
  }
  int dof = 0;
  const double statistic = ChiSquareStatistic(obs, exp, 5.0, &dof);
  EXPECT_LT(statistic, ChiSquareCriticalValue(dof, kAlpha)) << "dof " << dof;
}

TEST(SparseExponentialTopKTest, SinglePickMatchesSoftmaxOnSmallTable) {
  // 4 rows, 2 listed: the enumerating path (2 (listed + k) > num_rows).
  ExpectMatchesPeeling(SparseScores{4, {1, 3}, {1.0, 2.5}}, 1, 2.0, 1.0, 200000, 11);
}

TEST(SparseExponentialTopKTest, SinglePickMatchesSoftmaxOnLargeTable) {
  // 20 rows, 2 listed: zero-score rows come from the Gumbel order statistics and
  // rejection-sampled rows.
  ExpectMatchesPeeling(SparseScores{20, {4, 17}, {3.0, 1.5}}, 1, 2.0, 1.0, 200000, 12);
}

TEST(SparseExponentialTopKTest, TwoPicksMatchPeelingOnLargeTable) {
  // 10 rows, 2 listed, k = 2: 90 ordered outcomes.
  ExpectMatchesPeeling(SparseScores{10, {2, 7}, {4.0, 2.0}}, 2, 4.0, 1.0, 300000, 13);
}

TEST(SparseExponentialTopKTest, ThreePicksMatchPeelingOnSmallTable) {
  ExpectMatchesPeeling(SparseScores{6, {0, 1, 5}, {1.0, 3.0, 2.0}}, 3, 3.0, 0.5, 300000, 14);
}

TEST(SparseExponentialTopKTest, ReturnsEveryRowOnceWhenTableIsSmallerThanK) {
  auto mechanism = SparseExponentialTopK::Create(5, 1.0, 1.0);
  ASSERT_TRUE(mechanism.ok());
  SeededRandomGeneratorForTesting rng(1);
  auto selected = mechanism->Select(SparseScores{3, {1}, {1.0}}, rng);
  ASSERT_TRUE(selected.ok());
  EXPECT_EQ(std::set<int64_t>(selected->begin(), selected->end()), (std::set<int64_t>{0, 1, 2}));
}

TEST(SparseExponentialTopKTest, CostDoesNotGrowWithTableSize) {
  auto mechanism = SparseExponentialTopK::Create(8, 1.0, 1.0);
  ASSERT_TRUE(mechanism.ok());
  SparseScores scores;
  for (int i = 0; i < 50; ++i) {
    scores.rows.push_back(i * 7);
    scores.scores.push_back(0.1 * i);
  }
  for (int64_t num_rows : {int64_t{1000}, int64_t{1000000000000}}) {
    scores.num_rows = num_rows;
    CountingGeneratorForTesting rng(5);
    auto selected = mechanism->Select(scores, rng);
    ASSERT_TRUE(selected.ok());
    EXPECT_EQ(std::set<int64_t>(selected->begin(), selected->end()).size(), 8u);
    // 50 Gumbels + 8 order statistics + 8 row draws (+ rare rejections).
    EXPECT_LE(rng.count(), 50 + 8 + 8 + 8) << "num_rows " << num_rows;
  }
}

TEST(SparseExponentialTopKTest, EventIsSelfComposedBoundedRangePerPick) {
  auto mechanism = SparseExponentialTopK::Create(4, 2.0, 1.0);
  ASSERT_TRUE(mechanism.ok());
  const accounting::Event event = mechanism->event();
  EXPECT_EQ(event.kind(), accounting::EventKind::kSelfComposed);
  EXPECT_EQ(event.count(), 4);
  EXPECT_EQ(event.inner().kind(), accounting::EventKind::kBoundedRange);
  EXPECT_DOUBLE_EQ(event.inner().epsilon(), 0.5);
}

TEST(SparseExponentialTopKTest, RejectsBadParametersNamingThem) {
  EXPECT_NE(SparseExponentialTopK::Create(0, 1.0, 1.0).status().message().find("k must be >= 1"),
            std::string::npos);
  EXPECT_NE(SparseExponentialTopK::Create(1, 0.0, 1.0).status().message().find("epsilon"),
            std::string::npos);
  EXPECT_NE(SparseExponentialTopK::Create(1, 1.0, -1.0).status().message().find("sensitivity"),
            std::string::npos);
  EXPECT_FALSE(SparseExponentialTopK::Create(1, NAN, 1.0).ok());
}

TEST(SparseExponentialTopKTest, RejectsMalformedScores) {
  auto mechanism = SparseExponentialTopK::Create(1, 1.0, 1.0);
  ASSERT_TRUE(mechanism.ok());
  SeededRandomGeneratorForTesting rng(1);
  EXPECT_FALSE(mechanism->Select(SparseScores{5, {1, 1}, {1.0, 2.0}}, rng).ok());
  EXPECT_FALSE(mechanism->Select(SparseScores{5, {5}, {1.0}}, rng).ok());
  EXPECT_FALSE(mechanism->Select(SparseScores{5, {1}, {-1.0}}, rng).ok());
  EXPECT_FALSE(mechanism->Select(SparseScores{5, {1}, {INFINITY}}, rng).ok());
  EXPECT_FALSE(mechanism->Select(SparseScores{5, {1, 2}, {1.0}}, rng).ok());
  EXPECT_FALSE(mechanism->Select(SparseScores{0, {}, {}}, rng).ok());
}

}  // namespace
}  // namespace dpkit::mechanisms
