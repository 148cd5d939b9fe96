#include "models/wide/dense_dp_optimizer.h"

#include <cmath>

#include "gtest/gtest.h"
#include "mechanisms/random.h"

namespace dpkit::models::wide {
namespace {

TEST(DenseDpOptimizerTest, NonPrivateSgdIsClippedAverageStep) {
  auto opt = DenseDpOptimizer::Create("sgd", 2, 0.5, 1.0, 0.0, 4.0);
  ASSERT_TRUE(opt.ok());
  // Example 1 (3, 4) norm 5 -> (0.6, 0.8); example 2 (0.1, 0) unclipped. Sum / 4.
  const std::vector<float> g{3, 4, 0.1f, 0};
  std::vector<float> params{1, 1};
  mechanisms::SeededRandomGeneratorForTesting rng(1);
  opt->Step(g, 2, absl::MakeSpan(params), rng);
  EXPECT_NEAR(params[0], 1 - 0.5 * 0.7 / 4, 1e-6);
  EXPECT_NEAR(params[1], 1 - 0.5 * 0.8 / 4, 1e-6);
}

TEST(DenseDpOptimizerTest, FirstAdamStepMovesEachCoordinateByTheLearningRate) {
  // Adam's first bias-corrected step is lr * g / (|g| + 1e-8) = lr * sign(g).
  auto opt = DenseDpOptimizer::Create("adam", 2, 0.01, 10.0, 0.0, 1.0);
  ASSERT_TRUE(opt.ok());
  std::vector<float> params{0, 0};
  mechanisms::SeededRandomGeneratorForTesting rng(1);
  opt->Step(std::vector<float>{2, -3}, 1, absl::MakeSpan(params), rng);
  EXPECT_NEAR(params[0], -0.01, 1e-8);
  EXPECT_NEAR(params[1], 0.01, 1e-8);
}

TEST(DenseDpOptimizerTest, NoiseHasStatedScale) {
  // Empty batch: the gradient is N(0, (z C)^2) / B per coordinate. 100,000 coordinates:
  // the sample variance's relative standard error is sqrt(2/n) = 0.0045; a 5% tolerance is
  // 11 standard errors (false failure < 1e-20).
  const int64_t n = 100000;
  auto opt = DenseDpOptimizer::Create("sgd", n, 1.0, 2.0, 1.5, 10.0);
  ASSERT_TRUE(opt.ok());
  std::vector<float> params(n, 0.0f);
  mechanisms::SeededRandomGeneratorForTesting rng(9);
  opt->Step({}, 0, absl::MakeSpan(params), rng);
  double sum = 0;
  for (double g : opt->last_gradient()) sum += g * g;
  EXPECT_NEAR(std::sqrt(sum / n), 1.5 * 2.0 / 10.0, 0.05 * 0.3);
}

TEST(DenseDpOptimizerTest, RejectsBadParameters) {
  EXPECT_FALSE(DenseDpOptimizer::Create("adagrad", 2, 1, 1, 1, 1).ok());
  EXPECT_FALSE(DenseDpOptimizer::Create("sgd", 2, 0, 1, 1, 1).ok());
  EXPECT_FALSE(DenseDpOptimizer::Create("sgd", 2, 1, 1, -1, 1).ok());
}

}  // namespace
}  // namespace dpkit::models::wide
