#include "optim/poisson_sampler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "mechanisms/random.h"

namespace dpkit::optim {
namespace {

TEST(PoissonSamplerTest, EachIndexIsChosenWithProbabilityQ) {
  // 20000 draws over n = 10 with q = 0.3: each count ~ Bin(20000, 0.3), mean 6000,
  // sd 64.8; a 6 sd band fails with probability < 2e-9 per index (seeded: deterministic).
  mechanisms::SeededRandomGeneratorForTesting rng(42);
  std::vector<int> counts(10, 0);
  int64_t total = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto sample = PoissonSample(rng, 10, 0.3);
    ASSERT_TRUE(sample.ok());
    ASSERT_TRUE(std::is_sorted(sample->begin(), sample->end()));
    ASSERT_EQ(std::set<int64_t>(sample->begin(), sample->end()).size(), sample->size());
    for (int64_t i : *sample) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, 10);
      ++counts[i];
    }
    total += static_cast<int64_t>(sample->size());
  }
  for (int c : counts) EXPECT_NEAR(c, 6000, 6 * 64.8);
  EXPECT_NEAR(total, 60000, 6 * std::sqrt(200000 * 0.3 * 0.7));
}

TEST(PoissonSamplerTest, LargePopulationHasBinomialBatchSize) {
  // n = 60000, q = 256/60000: size ~ Bin, mean 256, sd 15.97; over 200 batches the mean
  // size has sd 1.13: a 6 sd band (false failure < 2e-9).
  mechanisms::SeededRandomGeneratorForTesting rng(7);
  double sum = 0;
  for (int t = 0; t < 200; ++t) sum += PoissonSample(rng, 60000, 256.0 / 60000)->size();
  EXPECT_NEAR(sum / 200, 256, 6 * 1.13);
}

TEST(PoissonSamplerTest, TinyRateGivesEmptyBatches) {
  mechanisms::SeededRandomGeneratorForTesting rng(3);
  int empty = 0;
  for (int t = 0; t < 100; ++t) empty += PoissonSample(rng, 5, 1e-6)->empty();
  EXPECT_GE(empty, 99);  // P(non-empty) = 5e-6 per batch
}

TEST(PoissonSamplerTest, RateOneTakesEveryone) {
  mechanisms::SeededRandomGeneratorForTesting rng(3);
  EXPECT_EQ(PoissonSample(rng, 4, 1.0)->size(), 4u);
}

TEST(PoissonSamplerTest, RejectsBadArguments) {
  mechanisms::SeededRandomGeneratorForTesting rng(3);
  EXPECT_FALSE(PoissonSample(rng, 0, 0.5).ok());
  EXPECT_FALSE(PoissonSample(rng, 10, 0.0).ok());
  EXPECT_FALSE(PoissonSample(rng, 10, 1.5).ok());
  EXPECT_FALSE(PoissonSample(rng, 10, NAN).ok());
}

TEST(PoissonSamplerTest, ShuffledBatchesCoverEachIndexOncePerEpoch) {
  auto batches = ShuffledFixedSizeBatches::Create(10, 3, 1);
  ASSERT_TRUE(batches.ok());
  auto epoch = batches->NextEpoch();
  ASSERT_EQ(epoch.size(), 3u);
  std::set<int64_t> seen;
  for (auto& b : epoch) {
    EXPECT_EQ(b.size(), 3u);
    seen.insert(b.begin(), b.end());
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_FALSE(ShuffledFixedSizeBatches::kCoveredByPoissonAccounting);
  EXPECT_FALSE(ShuffledFixedSizeBatches::Create(10, 11, 1).ok());
}

}  // namespace
}  // namespace dpkit::optim
