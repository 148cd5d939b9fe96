#include "dpkit/optim/poisson_sampler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"

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
  mechanisms::SeededRandomGeneratorForTesting rng(1);
  auto batches = ShuffledFixedSizeBatches::Create(10, 3);
  ASSERT_TRUE(batches.ok());
  EXPECT_EQ(batches->batches_per_epoch(), 3);
  auto epoch = batches->NextEpoch(rng);
  ASSERT_EQ(epoch.size(), 3u);
  std::set<int64_t> seen;
  for (auto& b : epoch) {
    EXPECT_EQ(b.size(), 3u);
    seen.insert(b.begin(), b.end());
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_FALSE(ShuffledFixedSizeBatches::kCoveredByPoissonAccounting);
  EXPECT_FALSE(ShuffledFixedSizeBatches::Create(10, 11).ok());
  EXPECT_FALSE(ShuffledFixedSizeBatches::Create(0, 1).ok());
}

TEST(PoissonSamplerTest, ShuffledFirstPositionIsUniform) {
  // 6000 epochs of a population of 4: the example in the first slot is uniform on 4
  // values. Chi-square with 3 degrees of freedom; 16.27 is its 0.999 quantile, so this
  // fixed-seed test has false-failure probability 1e-3 over seeds.
  mechanisms::SeededRandomGeneratorForTesting rng(5);
  auto batches = ShuffledFixedSizeBatches::Create(4, 1);
  ASSERT_TRUE(batches.ok());
  std::vector<int> counts(4, 0);
  const int epochs = 6000;
  for (int e = 0; e < epochs; ++e) ++counts[batches->NextEpoch(rng)[0][0]];
  double chi2 = 0;
  for (int c : counts) chi2 += (c - epochs / 4.0) * (c - epochs / 4.0) / (epochs / 4.0);
  EXPECT_LT(chi2, 16.27);
}

TEST(PoissonSamplerTest, NumMicrobatchesRoundsTheExpectedCount) {
  EXPECT_EQ(NumMicrobatches(256, 1), 256);
  EXPECT_EQ(NumMicrobatches(256, 4), 64);
  EXPECT_EQ(NumMicrobatches(250, 4), 63);  // 62.5 rounds half away from zero
  EXPECT_EQ(NumMicrobatches(3, 8), 1);     // at least one
}

TEST(PoissonSamplerTest, MicrobatchesPartitionTheBatchIntoRuns) {
  std::vector<int64_t> batch = {3, 8, 11, 20, 21, 40, 41, 42, 77, 90};
  MicrobatchedBatch mb = AssignMicrobatches(batch, 3, 12345);
  int64_t total = 0;
  for (int64_t s : mb.microbatch_sizes) {
    EXPECT_GE(s, 1);
    total += s;
  }
  EXPECT_EQ(total, static_cast<int64_t>(batch.size()));
  EXPECT_LE(mb.microbatch_sizes.size(), 3u);
  std::vector<int64_t> sorted = mb.examples;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, batch);
}

// The property the sensitivity argument needs (optim/clipping.h): adding one example to a
// batch leaves every microbatch that does not contain it unchanged.
TEST(PoissonSamplerTest, AddingAnExampleChangesOnlyItsOwnMicrobatch) {
  mechanisms::SeededRandomGeneratorForTesting rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    auto batch = PoissonSample(rng, 1000, 0.05);
    ASSERT_TRUE(batch.ok());
    int64_t x = static_cast<int64_t>(mechanisms::UniformUint64Below(rng, 1000));
    std::vector<int64_t> without;
    for (int64_t i : *batch) {
      if (i != x) without.push_back(i);
    }
    std::vector<int64_t> with = without;
    with.push_back(x);
    std::sort(with.begin(), with.end());
    uint64_t key = rng.NextUint64();
    auto as_sets = [](const MicrobatchedBatch& mb) {
      std::set<std::set<int64_t>> sets;
      int64_t at = 0;
      for (int64_t s : mb.microbatch_sizes) {
        sets.insert(std::set<int64_t>(mb.examples.begin() + at, mb.examples.begin() + at + s));
        at += s;
      }
      return sets;
    };
    std::set<std::set<int64_t>> a = as_sets(AssignMicrobatches(without, 12, key));
    std::set<std::set<int64_t>> b = as_sets(AssignMicrobatches(with, 12, key));
    std::vector<std::set<int64_t>> only_a, only_b;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_a));
    std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_b));
    ASSERT_EQ(only_b.size(), 1u);
    EXPECT_EQ(only_b[0].count(x), 1u);
    ASSERT_LE(only_a.size(), 1u);  // 0 when x's microbatch was empty without it
    if (!only_a.empty()) {
      std::set<int64_t> expect = only_a[0];
      expect.insert(x);
      EXPECT_EQ(expect, only_b[0]);
    }
  }
}

TEST(StepRecordSamplerTest, PoissonStepsAndRateFollowTheExpectedBatchSize) {
  // n = 1000, B = 64: q = 0.064, ceil(1000 / 64) = 16 steps per epoch, and 2.5 epochs are
  // ceil(2.5 * 1000 / 64) = ceil(39.0625) = 40 steps.
  auto records = StepRecordSampler::Create(1000, 64, 1, /*shuffled=*/false);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_DOUBLE_EQ(records->sampling_rate(), 0.064);
  EXPECT_EQ(records->steps_per_epoch(), 16);
  EXPECT_EQ(records->TotalSteps(2.5), 40);
  // Single-example records: every example of the sorted Poisson sample is its own record.
  mechanisms::SeededRandomGeneratorForTesting rng(7);
  int64_t total = 0;
  for (int step = 0; step < 200; ++step) {
    auto batch = records->Next(step, rng);
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(std::is_sorted(batch->examples.begin(), batch->examples.end()));
    ASSERT_EQ(batch->microbatch_sizes, std::vector<int64_t>(batch->examples.size(), 1));
    total += static_cast<int64_t>(batch->examples.size());
  }
  // Mean batch size 64 over 200 steps: total ~ Bin(200000, 0.064), sd 109.5; 6 sd band.
  EXPECT_NEAR(static_cast<double>(total), 12800.0, 6 * 109.5);
}

TEST(StepRecordSamplerTest, MicrobatchesUseTheFixedSlotCount) {
  // B = 64, k = 4: M = 16 slots; the records partition the step's examples.
  auto records = StepRecordSampler::Create(1000, 64, 4, /*shuffled=*/false);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->num_microbatches(), 16);
  mechanisms::SeededRandomGeneratorForTesting rng(8);
  for (int step = 0; step < 50; ++step) {
    auto batch = records->Next(step, rng);
    ASSERT_TRUE(batch.ok());
    ASSERT_LE(batch->microbatch_sizes.size(), 16u);
    int64_t sum = 0;
    for (int64_t size : batch->microbatch_sizes) {
      ASSERT_GT(size, 0);
      sum += size;
    }
    ASSERT_EQ(sum, static_cast<int64_t>(batch->examples.size()));
    ASSERT_EQ(std::set<int64_t>(batch->examples.begin(), batch->examples.end()).size(),
              batch->examples.size());
  }
}

TEST(StepRecordSamplerTest, ShuffledEpochsCoverEachExampleOnceAndRestartAfterAResume) {
  // n = 10, B = 3: floor(10 / 3) = 3 full batches per epoch, one example sits out.
  auto records = StepRecordSampler::Create(10, 3, 1, /*shuffled=*/true);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->steps_per_epoch(), 3);
  EXPECT_EQ(records->TotalSteps(2.0), 6);
  mechanisms::SeededRandomGeneratorForTesting rng(9);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    for (int i = 0; i < 3; ++i) {
      auto batch = records->Next(epoch * 3 + i, rng);
      ASSERT_TRUE(batch.ok());
      ASSERT_EQ(batch->examples.size(), 3u);
      seen.insert(batch->examples.begin(), batch->examples.end());
    }
    EXPECT_EQ(seen.size(), 9u);  // disjoint batches within an epoch
  }
  // A resumed run starts mid-epoch (step 4 of epoch 1): its first call draws a permutation.
  auto resumed = StepRecordSampler::Create(10, 3, 1, /*shuffled=*/true);
  ASSERT_TRUE(resumed.ok());
  auto batch = resumed->Next(4, rng);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->examples.size(), 3u);
}

TEST(StepRecordSamplerTest, RejectsBadArguments) {
  EXPECT_FALSE(StepRecordSampler::Create(10, 11, 1, false).ok());
  EXPECT_FALSE(StepRecordSampler::Create(10, 0, 1, false).ok());
  EXPECT_FALSE(StepRecordSampler::Create(0, 1, 1, true).ok());
  EXPECT_FALSE(StepRecordSampler::Create(10, 3, 0, false).ok());
  auto records = StepRecordSampler::Create(10, 3, 1, false);
  ASSERT_TRUE(records.ok());
  mechanisms::SeededRandomGeneratorForTesting rng(1);
  EXPECT_FALSE(records->Next(-1, rng).ok());
}

TEST(PoissonSamplerTest, PhysicalBatchesNeverSplitAMicrobatch) {
  std::vector<int64_t> sizes = {3, 2, 4, 9, 1, 1};
  auto ranges = PhysicalBatchRanges(sizes, 5);
  // {3,2} {4} {9 (alone, larger than 5)} {1,1}
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0].num_examples, 5);
  EXPECT_EQ(ranges[0].num_microbatches, 2);
  EXPECT_EQ(ranges[1].first_example, 5);
  EXPECT_EQ(ranges[1].num_examples, 4);
  EXPECT_EQ(ranges[2].num_examples, 9);
  EXPECT_EQ(ranges[2].first_microbatch, 3);
  EXPECT_EQ(ranges[3].first_example, 18);
  EXPECT_EQ(ranges[3].num_microbatches, 2);
  EXPECT_TRUE(PhysicalBatchRanges({}, 5).empty());
}

}  // namespace
}  // namespace dpkit::optim
