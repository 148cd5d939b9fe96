#include "dpkit/models/wide/word2vec.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dpkit::models::wide {
namespace {

TEST(Word2VecTest, GradientMatchesCentralFiniteDifferences) {
  Word2Vec model(6, 3, 1);
  // Give the output embeddings non-zero values so every term matters.
  for (size_t i = 0; i < model.table().size(); ++i) {
    model.table()[i] = static_cast<float>(0.3 * std::sin(1.7 * static_cast<double>(i) + 0.2));
  }
  // Context with a repeated word; a negative equal to the target and a repeated negative.
  const CbowSample sample{2, {0, 1, 1, 4}};
  const std::vector<int32_t> negatives{2, 5, 5, 3};
  optim::sparse::SparseRowGradient g;
  const double loss = model.LossAndGradient(sample, negatives, &g);
  EXPECT_NEAR(loss, model.Loss(sample, negatives), 1e-12);
  std::vector<double> dense(model.table().size(), 0.0);
  for (size_t i = 0; i < g.rows.size(); ++i) {
    for (int j = 0; j < 3; ++j) dense[static_cast<size_t>(g.rows[i] * 3 + j)] = g.values[i * 3 + j];
  }
  // Step 1e-3 in float parameters: central differences have error O(h^2) ~ 1e-6 plus
  // float rounding of the loss inputs ~ 1e-7 / h ~ 1e-4 relative; tolerance 2e-4.
  for (size_t i = 0; i < model.table().size(); ++i) {
    const float saved = model.table()[i];
    const float step = 1e-3f;
    model.table()[i] = saved + step;
    const double up = model.Loss(sample, negatives);
    model.table()[i] = saved - step;
    const double down = model.Loss(sample, negatives);
    model.table()[i] = saved;
    const double numeric = (up - down) / (2.0 * step);
    EXPECT_NEAR(dense[i], numeric, 2e-4) << "parameter " << i;
  }
}

TEST(Word2VecTest, LogPerplexityIsNormalisedSoftmax) {
  Word2Vec model(5, 2, 3);
  for (size_t i = 0; i < model.table().size(); ++i) model.table()[i] = 0.1f * static_cast<float>(i % 7);
  const std::vector<int32_t> context{0, 1};
  double total = 0;
  for (int32_t t = 0; t < 5; ++t) total += std::exp(-model.LogPerplexity(context, t));
  EXPECT_NEAR(total, 1.0, 1e-12);
}

TEST(Word2VecTest, ZeroOutputEmbeddingsGiveLogTwoPerTerm) {
  // With w = 0 every sigmoid is 1/2: loss = (1 + K) log 2.
  Word2Vec model(10, 4, 7);
  for (int64_t i = 10 * 4; i < 20 * 4; ++i) model.table()[static_cast<size_t>(i)] = 0.0f;
  EXPECT_NEAR(model.Loss(CbowSample{1, {2, 3, 4, 5}}, std::vector<int32_t>{6, 7, 8}),
              4 * std::log(2.0), 1e-12);
}

}  // namespace
}  // namespace dpkit::models::wide
