#include "dpkit/models/engine/user_records.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/mechanisms/random_testing.h"
#include "gtest/gtest.h"

namespace dpkit::models {
namespace {

// 12 users, user u (id 100 + u) with u + 1 examples, interleaved (round r lists the users
// u >= r), so a user's examples are not consecutive in the training set.
std::vector<int64_t> InterleavedUsers() {
  std::vector<int64_t> ids;
  for (int round = 0; round < 12; ++round) {
    for (int u = round; u < 12; ++u) ids.push_back(100 + u);
  }
  return ids;
}

TEST(UserRecordsTest, GroupsEachUsersExamples) {
  const std::vector<int64_t> ids = InterleavedUsers();
  auto index = UserIndex::Create(ids);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->num_users(), 12);
  EXPECT_EQ(index->num_examples(), static_cast<int64_t>(ids.size()));
  for (int64_t u = 0; u < 12; ++u) {
    ASSERT_EQ(static_cast<int64_t>(index->examples_of(u).size()), u + 1);
    for (int64_t e : index->examples_of(u)) EXPECT_EQ(ids[e], 100 + u);
  }
  const optim::MicrobatchedBatch batch = index->Records({2, 7});
  EXPECT_EQ(batch.microbatch_sizes, (std::vector<int64_t>{3, 8}));
  ASSERT_EQ(batch.examples.size(), 11u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(ids[batch.examples[i]], 102);
  for (size_t i = 3; i < 11; ++i) EXPECT_EQ(ids[batch.examples[i]], 107);
  EXPECT_FALSE(UserIndex::Create({}).ok());
}

// Each user is sampled with probability q, independently of how many examples it has,
// and then with ALL its examples as one record: over 40000 steps at q = 0.1 every user's
// inclusion frequency is within 5 binomial standard deviations (0.0075) of q, and a
// sample never holds part of a user.
TEST(UserRecordsTest, EachUserIsSampledWithRateQAsOneWholeRecord) {
  const std::vector<int64_t> ids = InterleavedUsers();
  auto index = UserIndex::Create(ids);
  ASSERT_TRUE(index.ok());
  mechanisms::SeededRandomGeneratorForTesting rng(2018);
  constexpr int kSteps = 40000;
  constexpr double kRate = 0.1;
  std::vector<int> included(12, 0);
  for (int step = 0; step < kSteps; ++step) {
    auto batch = index->SampleRecords(rng, kRate);
    ASSERT_TRUE(batch.ok());
    size_t offset = 0;
    for (int64_t size : batch->microbatch_sizes) {
      const int64_t user = ids[batch->examples[offset]] - 100;
      ASSERT_EQ(size, user + 1);  // the whole user, once
      for (int64_t k = 0; k < size; ++k) ASSERT_EQ(ids[batch->examples[offset + k]], 100 + user);
      offset += static_cast<size_t>(size);
      ++included[user];
    }
    ASSERT_EQ(offset, batch->examples.size());
  }
  const double sd = std::sqrt(kRate * (1 - kRate) / kSteps);
  for (int u = 0; u < 12; ++u) {
    EXPECT_NEAR(included[u] / static_cast<double>(kSteps), kRate, 5 * sd) << "user " << u;
  }
}

// The ledger of a user-level run is that of a record-level run over the N users: its
// entries carry q = B / N and the per-user clip norm, so epsilon is the record-level
// formula with n = N (here checked by RDP against DpSgdEvent(B / N, sigma, T)).
TEST(UserRecordsTest, UserLevelLedgerIsTheRecordLevelEventOverUsers) {
  auto index = UserIndex::Create(InterleavedUsers());
  ASSERT_TRUE(index.ok());
  const int64_t users = index->num_users(), expected_users = 3, steps = 50;
  const double q = static_cast<double>(expected_users) / static_cast<double>(users);
  std::vector<accounting::LedgerEntry> entries;
  for (int64_t t = 0; t < steps; ++t) {
    accounting::SamplingRecord record;
    record.step = t;
    record.sampling_rate = q;
    record.queries = {{2.0, 2.0 * 1.3}};  // C = 2, noise sigma C with sigma 1.3
    entries.push_back({record});
  }
  auto event = accounting::LedgerToEvent(entries);
  ASSERT_TRUE(event.ok()) << event.error();
  ASSERT_EQ(event->kind(), accounting::EventKind::kSelfComposed);
  EXPECT_EQ(event->count(), steps);
  EXPECT_EQ(event->inner().sampling_rate(), 0.25);
  EXPECT_NEAR(event->inner().inner().noise_multiplier(), 1.3, 1e-15);
  const accounting::Event reference = accounting::DpSgdEvent(0.25, 1.3, steps).value();
  const std::vector<double> orders = {2, 8, 32};
  const std::vector<double> rdp = accounting::ComputeRdp(*event, orders).value();
  const std::vector<double> expected = accounting::ComputeRdp(reference, orders).value();
  for (size_t k = 0; k < orders.size(); ++k) EXPECT_NEAR(rdp[k], expected[k], 1e-12 * expected[k]);
}

TEST(UserRecordsTest, ReadsOneUserIdPerExample) {
  const std::string path = ::testing::TempDir() + "/user_ids.txt";
  std::ofstream(path) << "7\n 3 \n7\n-2\n";
  auto ids = ReadUserIds(path, 4);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int64_t>{7, 3, 7, -2}));
  EXPECT_EQ(ReadUserIds(path, 5).status().message(),
            "--user_ids: " + path + " has 4 lines; it needs one per training example (5)");
  std::ofstream(path) << "7\nbob\n";
  EXPECT_EQ(ReadUserIds(path, 2).status().message(),
            "--user_ids: " + path + " line 2: not an integer user id");
  EXPECT_FALSE(ReadUserIds(path + ".missing", 2).ok());
}

TEST(UserRecordsTest, DefaultUserBatchKeepsTheModelsSamplingRate) {
  EXPECT_EQ(UserLevelBatchSize(6040, 800000, 10000), 76);  // rate 1/80
  EXPECT_EQ(UserLevelBatchSize(10, 1000, 1), 1);            // at least one user
  EXPECT_EQ(UserLevelBatchSize(10, 20, 20), 10);            // at most all users
}

}  // namespace
}  // namespace dpkit::models
