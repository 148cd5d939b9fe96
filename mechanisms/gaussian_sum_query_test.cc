#include "dpkit/mechanisms/gaussian_sum_query.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "dpkit/accounting/ledger.h"
#include "gtest/gtest.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"

namespace dpkit::mechanisms {
namespace {

RecordGroups Groups(const std::vector<std::vector<double>>& groups) {
  RecordGroups out;
  for (const auto& g : groups) out.push_back(absl::MakeConstSpan(g));
  return out;
}

TEST(GaussianSumQueryTest, FlatClippingScalesTheWholeRecord) {
  auto query = GaussianSumQuery::Flat({1, 1}, 1.0, 1.0);
  ASSERT_TRUE(query.ok());
  auto sums = query->ZeroSums();
  const std::vector<std::vector<double>> big = {{3.0}, {4.0}}, small = {{0.3}, {0.4}};
  ASSERT_TRUE(query->Accumulate(Groups(big), &sums).ok());
  ASSERT_TRUE(query->Accumulate(Groups(small), &sums).ok());
  EXPECT_NEAR(sums[0](0), 0.6 + 0.3, 1e-15);
  EXPECT_NEAR(sums[1](0), 0.8 + 0.4, 1e-15);
  ASSERT_EQ(query->records().size(), 1u);
  EXPECT_EQ(query->records()[0].noise_stddev, 1.0);
}

TEST(GaussianSumQueryTest, PerGroupClippingClipsEachGroupOnItsOwn) {
  auto query = GaussianSumQuery::PerGroup({2, 1}, {1.0, 10.0}, {1.0, 0.5});
  ASSERT_TRUE(query.ok());
  auto sums = query->ZeroSums();
  const std::vector<std::vector<double>> record = {{3.0, 4.0}, {5.0}};
  ASSERT_TRUE(query->Accumulate(Groups(record), &sums).ok());
  EXPECT_NEAR(sums[0](0), 0.6, 1e-15);
  EXPECT_NEAR(sums[0](1), 0.8, 1e-15);
  EXPECT_EQ(sums[1](0), 5.0);  // norm 5 <= 10: unclipped
  ASSERT_EQ(query->records().size(), 2u);
  EXPECT_EQ(query->records()[1].clip_norm, 10.0);
  EXPECT_EQ(query->records()[1].noise_stddev, 5.0);
}

TEST(GaussianSumQueryTest, JointClippingUsesTheScaledNorm) {
  // ||(3,4)/1|| = 5 and ||(6,8)/2|| = 5: scaled norm sqrt(50), factor 1/sqrt(50).
  auto query = GaussianSumQuery::Joint({2, 2}, {1.0, 2.0}, 1.0, 2.0);
  ASSERT_TRUE(query.ok());
  auto sums = query->ZeroSums();
  const std::vector<std::vector<double>> record = {{3.0, 4.0}, {6.0, 8.0}};
  ASSERT_TRUE(query->Accumulate(Groups(record), &sums).ok());
  const double f = 1.0 / std::sqrt(50.0);
  EXPECT_NEAR(sums[0](1), 4.0 * f, 1e-15);
  EXPECT_NEAR(sums[1](0), 6.0 * f, 1e-15);
  ASSERT_EQ(query->records().size(), 1u);
  EXPECT_EQ(query->records()[0].noise_stddev, 2.0);
}

TEST(GaussianSumQueryTest, NoiseHasTheStatedStddevPerGroup) {
  // Joint query: group j gets N(0, (z C s_j)^2) = stddev 2*1*1 and 2*1*3. With
  // 2e5 coordinates, the sample variance has relative sd sqrt(2/n) = 0.32 %;
  // bound 5.3 sd (two-sided normal approximation 1.2e-7).
  auto query = GaussianSumQuery::Joint({200000, 200000}, {1.0, 3.0}, 1.0, 2.0);
  SeededRandomGeneratorForTesting rng(4);
  auto sums = query->ZeroSums();
  query->AddNoise(rng, &sums);
  const double expected[2] = {4.0, 36.0};
  for (int j = 0; j < 2; ++j) {
    const double variance = sums[j].squaredNorm() / sums[j].size();
    EXPECT_NEAR(variance, expected[j], 5.3 * expected[j] * std::sqrt(2.0 / 200000));
  }
}

TEST(GaussianSumQueryTest, RejectsMismatchedOrNonFiniteRecords) {
  auto query = GaussianSumQuery::Flat({2}, 1.0, 1.0);
  auto sums = query->ZeroSums();
  const std::vector<std::vector<double>> wrong = {{1.0}}, nan = {{1.0, NAN}};
  EXPECT_FALSE(query->Accumulate(Groups(wrong), &sums).ok());
  EXPECT_FALSE(query->Accumulate(Groups(nan), &sums).ok());
  EXPECT_FALSE(GaussianSumQuery::Flat({2}, 0.0, 1.0).ok());
  EXPECT_FALSE(GaussianSumQuery::PerGroup({2}, {1.0}, {}).ok());
  EXPECT_FALSE(GaussianSumQuery::Joint({2}, {-1.0}, 1.0, 1.0).ok());
}

TEST(NestedGaussianAverageQueryTest, RecordsOneSamplingEventAndCollapsesNoise) {
  // Sub-queries {C=1, s=2} and {C=3, s=3}: z = (0.5^2 + 1^2)^(-1/2) = 0.894427...
  auto a = GaussianSumQuery::Flat({1}, 1.0, 2.0);
  auto b = GaussianSumQuery::Flat({2}, 3.0, 1.0);
  auto nested = NestedGaussianAverageQuery::Create({{"dense", *a}, {"embedding", *b}}, 0.01, 50.0);
  ASSERT_TRUE(nested.ok());
  EXPECT_NEAR(nested->collapsed_noise_multiplier(), 1.0 / std::sqrt(1.25), 1e-15);
  const std::vector<double> x = {0.5}, y = {0.0, 1.0};
  std::vector<std::vector<RecordGroups>> records = {{{absl::MakeConstSpan(x)}, {absl::MakeConstSpan(y)}}};
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/ledger.jsonl";
  auto ledger = accounting::LedgerWriter::Open(path);
  ASSERT_TRUE(ledger.ok()) << ledger.error();
  SeededRandomGeneratorForTesting rng(1), replay(1);
  auto release = nested->RunAndRecord(records, 7, rng, *ledger);
  ASSERT_TRUE(release.ok()) << release.status();
  // Average = (clipped sum + noise) / 50: replay the noise with the same seed.
  std::vector<double> noise(3);
  FillGaussian(replay, 2.0, noise.data(), 1);
  FillGaussian(replay, 3.0, noise.data() + 1, 2);
  EXPECT_NEAR(release->averages[0].second[0](0), (0.5 + noise[0]) / 50, 1e-12);
  EXPECT_NEAR(release->averages[1].second[0](1), (1.0 + noise[2]) / 50, 1e-12);
  ASSERT_EQ(release->averages.size(), 2u);
  EXPECT_EQ(release->averages[0].first, "dense");
  EXPECT_EQ(release->sampling_record.step, 7);
  EXPECT_EQ(release->sampling_record.sampling_rate, 0.01);
  ASSERT_EQ(release->sampling_record.queries.size(), 2u);
  EXPECT_EQ(release->sampling_record.queries[1].noise_stddev, 3.0);
  auto entries = accounting::ReadLedger(path);
  ASSERT_TRUE(entries.ok()) << entries.error();
  ASSERT_EQ(entries->size(), 1u);
  auto event = accounting::LedgerToEvent(*entries);
  ASSERT_TRUE(event.ok()) << event.error();
  // One step: PoissonSampled(0.01, Gaussian(z)) (possibly wrapped as one composition).
  const accounting::Event* e = &*event;
  if (e->kind() == accounting::EventKind::kSelfComposed) e = &e->inner();
  ASSERT_EQ(e->kind(), accounting::EventKind::kPoissonSampled);
  EXPECT_NEAR(e->inner().noise_multiplier(), 1.0 / std::sqrt(1.25), 1e-15);
}

TEST(NestedGaussianAverageQueryTest, AveragesDivideByTheExpectedBatchSize) {
  auto a = GaussianSumQuery::Flat({1}, 1.0, 1e-3);
  auto nested = NestedGaussianAverageQuery::Create({{"w", *a}}, 0.5, 4.0);
  const std::vector<double> x = {0.5};
  std::vector<std::vector<RecordGroups>> records(2, {{absl::MakeConstSpan(x)}});
  SeededRandomGeneratorForTesting rng(2);
  auto release = nested->Run(records, 0, rng);
  ASSERT_TRUE(release.ok());
  // (0.5 + 0.5 + N(0, 1e-6)) / 4: within 6 sd (1.5e-3 / 4) of 0.25 (P ~ 2e-9).
  EXPECT_NEAR(release->averages[0].second[0](0), 0.25, 6e-3 / 4);
  // Empty sample: pure noise, still divided by 4.
  auto empty = nested->Run({}, 1, rng);
  ASSERT_TRUE(empty.ok());
  EXPECT_NEAR(empty->averages[0].second[0](0), 0.0, 6e-3 / 4);
  EXPECT_FALSE(NestedGaussianAverageQuery::Create({{"w", *a}}, 0.0, 4.0).ok());
  EXPECT_FALSE(NestedGaussianAverageQuery::Create({{"w", *a}}, 0.5, 0.0).ok());
}

}  // namespace
}  // namespace dpkit::mechanisms
