#include "dpkit/optim/sparse/private_selection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/sparse_exponential.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit::optim::sparse {
namespace {

using mechanisms::SeededRandomGeneratorForTesting;

// Every chi-square test below fails with probability <= 1e-6 when the sampler is
// correct (critical value at alpha = 1e-6; fixed seeds make each run reproducible).
constexpr double kAlpha = 1e-6;


TEST(ExponentialTopKSelectorTest, DrawsExactlyWhatTheMechanismsSamplerDraws) {
  // The selector delegates to mechanisms::SparseExponentialTopK, whose distribution
  // (softmax / peeling, chi-square at 1e-6) is tested in mechanisms/sparse_exponential_test.
  // Same seed, same scores: the same rows in the same order, on the dense and sparse paths.
  for (const SparseScores& scores :
       {SparseScores{4, {1, 3}, {1.0, 2.5}}, SparseScores{20, {4, 17}, {3.0, 1.5}},
        SparseScores{6, {0, 1, 5}, {1.0, 3.0, 2.0}}, SparseScores{3, {1}, {1.0}}}) {
    for (int64_t k : {1, 2, 5}) {
      auto selector = ExponentialTopKSelector::Create(k, 3.0, 0.5);
      auto sampler = mechanisms::SparseExponentialTopK::Create(k, 3.0, 0.5);
      ASSERT_TRUE(selector.ok() && sampler.ok());
      for (uint64_t seed = 1; seed <= 20; ++seed) {
        SeededRandomGeneratorForTesting rng_a(seed), rng_b(seed);
        auto a = (*selector)->Select(scores, rng_a);
        auto b = sampler->Select(scores, rng_b);
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_EQ(*a, *b) << "k " << k << " seed " << seed;
        EXPECT_EQ(a->size(), static_cast<size_t>(std::min<int64_t>(k, scores.num_rows)));
      }
    }
  }
}

TEST(ExponentialTopKSelectorTest, CostDoesNotGrowWithTableSize) {
  auto selector = ExponentialTopKSelector::Create(8, 1.0, 1.0);
  ASSERT_TRUE(selector.ok());
  SparseScores scores;
  for (int i = 0; i < 50; ++i) {
    scores.rows.push_back(i * 7);
    scores.scores.push_back(0.1 * i);
  }
  for (int64_t num_rows : {int64_t{1000}, int64_t{1000000000000}}) {
    scores.num_rows = num_rows;
    mechanisms::CountingGeneratorForTesting rng(5);
    auto selected = (*selector)->Select(scores, rng);
    ASSERT_TRUE(selected.ok());
    EXPECT_EQ(selected->size(), 8u);
    // 50 Gumbels + 8 order statistics + 8 row draws (+ rare rejections).
    EXPECT_LE(rng.count(), 50 + 8 + 8 + 8) << "num_rows " << num_rows;
  }
}

TEST(ExponentialTopKSelectorTest, EventIsSelfComposedBoundedRangePerPick) {
  auto selector = ExponentialTopKSelector::Create(4, 2.0, 1.0);
  ASSERT_TRUE(selector.ok());
  const accounting::Event event = (*selector)->PrivacyEvent();
  EXPECT_EQ(event.kind(), accounting::EventKind::kSelfComposed);
  EXPECT_EQ(event.count(), 4);
  EXPECT_EQ(event.inner().kind(), accounting::EventKind::kBoundedRange);
  EXPECT_DOUBLE_EQ(event.inner().epsilon(), 0.5);
}

TEST(ExponentialTopKSelectorTest, RejectsBadParameters) {
  EXPECT_FALSE(ExponentialTopKSelector::Create(0, 1.0, 1.0).ok());
  EXPECT_FALSE(ExponentialTopKSelector::Create(1, 0.0, 1.0).ok());
  EXPECT_FALSE(ExponentialTopKSelector::Create(1, 1.0, -1.0).ok());
  EXPECT_FALSE(ExponentialTopKSelector::Create(1, NAN, 1.0).ok());
}

TEST(SelectorTest, RejectsMalformedScores) {
  auto selector = ExponentialTopKSelector::Create(1, 1.0, 1.0);
  ASSERT_TRUE(selector.ok());
  SeededRandomGeneratorForTesting rng(1);
  EXPECT_FALSE((*selector)->Select(SparseScores{5, {1, 1}, {1.0, 2.0}}, rng).ok());
  EXPECT_FALSE((*selector)->Select(SparseScores{5, {5}, {1.0}}, rng).ok());
  EXPECT_FALSE((*selector)->Select(SparseScores{5, {1}, {-1.0}}, rng).ok());
  EXPECT_FALSE((*selector)->Select(SparseScores{5, {1}, {INFINITY}}, rng).ok());
  EXPECT_FALSE((*selector)->Select(SparseScores{5, {1, 2}, {1.0}}, rng).ok());
  EXPECT_FALSE((*selector)->Select(SparseScores{0, {}, {}}, rng).ok());
}

// P(Lap(b) >= x).
double LaplaceUpper(double x, double b) {
  return x >= 0 ? 0.5 * std::exp(-x / b) : 1.0 - 0.5 * std::exp(x / b);
}

// Exact outcome probabilities of Lyu et al. Alg. 1 on a small dense score vector:
// integrate over the threshold noise rho (trapezoid rule on [-60 b1, 60 b1], 200001
// points; the neglected tail mass is e^-60) the probability of each pass/fail pattern,
// given rho every row passes independently, and the scan stops at c passes.
std::map<std::vector<int>, double> SvtOutcomeProbabilities(const std::vector<double>& u,
                                                           double threshold, int c, double b1,
                                                           double b2) {
  std::map<std::vector<int>, double> out;
  const int n = static_cast<int>(u.size());
  const int points = 200001;
  const double lo = -60 * b1, hi = 60 * b1, h = (hi - lo) / (points - 1);
  for (int p = 0; p < points; ++p) {
    const double rho = lo + p * h;
    const double weight = (p == 0 || p == points - 1 ? 0.5 : 1.0) * h *
                          std::exp(-std::fabs(rho) / b1) / (2 * b1);
    // Enumerate outcomes by a depth-first scan.
    struct State {
      int next;
      std::vector<int> chosen;
      double prob;
    };
    std::vector<State> stack{{0, {}, 1.0}};
    while (!stack.empty()) {
      State s = stack.back();
      stack.pop_back();
      if (s.next == n || static_cast<int>(s.chosen.size()) == c) {
        out[s.chosen] += weight * s.prob;
        continue;
      }
      const double pass = LaplaceUpper(threshold + rho - u[static_cast<size_t>(s.next)], b2);
      State yes = s, no = s;
      yes.chosen.push_back(s.next);
      yes.next = no.next = s.next + 1;
      yes.prob *= pass;
      no.prob *= 1 - pass;
      stack.push_back(yes);
      stack.push_back(no);
    }
  }
  return out;
}

TEST(SparseVectorSelectorTest, OutcomesMatchDenseAboveThreshold) {
  const int c = 2;
  const double epsilon = 3.0, threshold = 1.0, sensitivity = 1.0;
  auto selector = SparseVectorSelector::Create(c, epsilon, threshold, sensitivity);
  ASSERT_TRUE(selector.ok());
  const double b1 = sensitivity / (*selector)->threshold_epsilon();
  const double b2 = 2 * c * sensitivity / (*selector)->query_epsilon();
  const SparseScores scores{7, {1, 4}, {2.0, 3.5}};
  const std::vector<double> dense{0, 2.0, 0, 0, 3.5, 0, 0};
  const auto expected = SvtOutcomeProbabilities(dense, threshold, c, b1, b2);
  double total = 0;
  for (const auto& [key, p] : expected) total += p;
  // The trapezoid rule's error on the Laplace density (kink at 0) is about
  // h^2 / (6 b1^2) ~ 6e-8 for h = 6e-4 b1; the tails beyond 60 b1 hold e^-60. 1e-6 in
  // probability changes no expected count below by more than 0.3.
  ASSERT_NEAR(total, 1.0, 1e-6);
  const int trials = 300000;
  std::map<std::vector<int>, double> observed;
  SeededRandomGeneratorForTesting rng(21);
  for (int t = 0; t < trials; ++t) {
    auto selected = (*selector)->Select(scores, rng);
    ASSERT_TRUE(selected.ok());
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
  const double statistic = mechanisms::ChiSquareStatistic(obs, exp, 5.0, &dof);
  EXPECT_LT(statistic, mechanisms::ChiSquareCriticalValue(dof, kAlpha)) << "dof " << dof;
}

TEST(SparseVectorSelectorTest, SelectsAtMostCRowsInIndexOrder) {
  auto selector = SparseVectorSelector::Create(3, 1.0, -100.0, 1.0);  // everything passes
  ASSERT_TRUE(selector.ok());
  SeededRandomGeneratorForTesting rng(3);
  auto selected = (*selector)->Select(SparseScores{1000, {500}, {1.0}}, rng);
  ASSERT_TRUE(selected.ok());
  EXPECT_EQ(*selected, (std::vector<int64_t>{0, 1, 2}));
}

TEST(SparseVectorSelectorTest, CostDoesNotGrowWithTableSize) {
  auto selector = SparseVectorSelector::Create(5, 1.0, 30.0, 1.0);
  ASSERT_TRUE(selector.ok());
  SparseScores scores;
  for (int i = 0; i < 40; ++i) {
    scores.rows.push_back(i * 11);
    scores.scores.push_back(i % 2 ? 40.0 : 0.5);
  }
  for (int64_t num_rows : {int64_t{1000}, int64_t{1000000000000}}) {
    scores.num_rows = num_rows;
    mechanisms::CountingGeneratorForTesting rng(9);
    auto selected = (*selector)->Select(scores, rng);
    ASSERT_TRUE(selected.ok());
    // Threshold + one Laplace per listed row + one geometric skip per gap.
    EXPECT_LE(rng.count(), 1 + 40 + 41) << "num_rows " << num_rows;
  }
}

TEST(SparseVectorSelectorTest, SplitsEpsilonAsLyuEtAl) {
  auto selector = SparseVectorSelector::Create(4, 2.0, 0.0, 1.0);
  ASSERT_TRUE(selector.ok());
  const double ratio = std::pow(8.0, 2.0 / 3.0);  // (2c)^(2/3) = 4
  EXPECT_NEAR((*selector)->threshold_epsilon(), 2.0 / (1 + ratio), 1e-15);
  EXPECT_NEAR((*selector)->threshold_epsilon() + (*selector)->query_epsilon(), 2.0, 1e-15);
  EXPECT_EQ((*selector)->PrivacyEvent().kind(), accounting::EventKind::kPureDp);
  EXPECT_DOUBLE_EQ((*selector)->PrivacyEvent().epsilon(), 2.0);
}

TEST(SparseVectorSelectorTest, RejectsBadParameters) {
  EXPECT_FALSE(SparseVectorSelector::Create(0, 1.0, 0.0, 1.0).ok());
  EXPECT_FALSE(SparseVectorSelector::Create(1, -1.0, 0.0, 1.0).ok());
  EXPECT_FALSE(SparseVectorSelector::Create(1, 1.0, NAN, 1.0).ok());
  EXPECT_FALSE(SparseVectorSelector::Create(1, 1.0, 0.0, 0.0).ok());
}

}  // namespace
}  // namespace dpkit::optim::sparse
