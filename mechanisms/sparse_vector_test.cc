#include "dpkit/mechanisms/sparse_vector.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"

namespace dpkit::mechanisms {
namespace {

TEST(SparseVectorTest, NoiseScalesFollowDworkRoth) {
  auto svt = SparseVector::Create(1.0, 10.0, 3, 2.0, false);
  ASSERT_TRUE(svt.ok());
  EXPECT_DOUBLE_EQ(svt->threshold_noise_scale(), 2.0 * 3 * 2.0 / 1.0);
  EXPECT_DOUBLE_EQ(svt->query_noise_scale(), 4.0 * 3 * 2.0 / 1.0);
  EXPECT_EQ(svt->value_noise_scale(), 0.0);
  auto numeric = SparseVector::Create(0.9, 10.0, 2, 1.0, true);
  EXPECT_DOUBLE_EQ(numeric->threshold_noise_scale(), 2.0 * 2 / 0.8);
  EXPECT_DOUBLE_EQ(numeric->value_noise_scale(), 2.0 * 2 / 0.2);
  EXPECT_EQ(numeric->event().epsilon(), 0.9);
}

TEST(SparseVectorTest, StopsAfterCPositivesAndFindsClearPositives) {
  // Scores far from the threshold relative to the noise (scales 0.012, 0.024 at
  // eps = 1000): P(any wrong answer) < 1e6 * exp(-1000/0.024) ~ 0.
  std::vector<double> scores(1000000, 0.0);
  scores[10] = scores[500] = scores[900000] = scores[999999] = 100.0;
  auto svt = SparseVector::Create(1000.0, 50.0, 3, 1.0, true);
  SeededRandomGeneratorForTesting rng(1);
  auto result = svt->Run(absl::MakeConstSpan(scores), rng);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->indices, (std::vector<size_t>{10, 500, 900000}));
  EXPECT_EQ(result->scores_examined, 900001u);
  ASSERT_EQ(result->noisy_values.size(), 3u);
  for (double v : result->noisy_values) EXPECT_NEAR(v, 100.0, 1.0);
}

TEST(AboveThresholdTest, SinglePositiveProbabilityMatchesIntegration) {
  // One query u vs threshold T: P(u + nu >= T + rho), nu ~ Lap(4/eps),
  // rho ~ Lap(2/eps), integrated by the trapezoid rule (step 1e-3 on +-80).
  const double epsilon = 1.0, u = 1.0, t = 2.0;
  const double b_rho = 2 / epsilon, b_nu = 4 / epsilon;
  double p = 0;
  for (double r = -80; r <= 80; r += 1e-3) {
    const double pdf = std::exp(-std::fabs(r) / b_rho) / (2 * b_rho);
    const double x = t + r - u;  // need nu >= x
    const double tail = x < 0 ? 1 - 0.5 * std::exp(x / b_nu) : 0.5 * std::exp(-x / b_nu);
    p += pdf * tail * 1e-3;
  }
  auto svt = SparseVector::Create(epsilon, t, 1, 1.0, false);
  SeededRandomGeneratorForTesting rng(2);
  const int n = 200000;
  int positives = 0;
  const std::vector<double> scores = {u};
  for (int i = 0; i < n; ++i) positives += !svt->Run(absl::MakeConstSpan(scores), rng)->indices.empty();
  // 5.3 sd two-sided: false-failure 1.2e-7.
  EXPECT_NEAR(positives / static_cast<double>(n), p, 5.3 * std::sqrt(p * (1 - p) / n));
}

TEST(SparseVectorTest, RejectsBadInput) {
  EXPECT_FALSE(SparseVector::Create(0.0, 1.0, 1, 1.0, false).ok());
  EXPECT_FALSE(SparseVector::Create(1.0, NAN, 1, 1.0, false).ok());
  EXPECT_FALSE(SparseVector::Create(1.0, 1.0, 0, 1.0, false).ok());
  EXPECT_FALSE(SparseVector::Create(1.0, 1.0, 1, 0.0, false).ok());
  auto svt = SparseVector::Create(1.0, 1.0, 1, 1.0, false);
  SeededRandomGeneratorForTesting rng(1);
  std::vector<double> bad = {INFINITY};
  EXPECT_FALSE(svt->Run(absl::MakeConstSpan(bad), rng).ok());
}

}  // namespace
}  // namespace dpkit::mechanisms
