// End to end: `dpkit train movielens` on a small ratings.dat written here: 60 users x 40
// movies, every pair rated, rating = (movie even ? 4 : 1) + (user odd ? 1 : 0) — an easy
// signal that the model's dense output over the MLP branch's embeddings can represent.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/wide/trainer_testing.h"
#include "dpkit/models/wide/wide_testing.h"
#include "nlohmann/json.hpp"

namespace dpkit::models::wide {
namespace {

std::string WriteToyMovieLens(const std::string& name) {
  MakeTestDirectory(TestPath(name));
  std::string text;
  for (int u = 1; u <= 60; ++u) {
    for (int m = 1; m <= 40; ++m) {
      const int rating = (m % 2 == 0 ? 4 : 1) + (u % 2 == 1 ? 1 : 0);
      text += std::to_string(u) + "::" + std::to_string(m) + "::" + std::to_string(rating) +
              "::97830" + std::to_string(u % 10) + "\n";
    }
  }
  WriteTestFile(name + "/ratings.dat", text);
  return TestPath(name);
}

TEST(MovieLensTrainerTest, LearnsAnEasySignalAndWritesAnAccountedLedger) {
  const TrainerInfo* trainer = FindTrainer("movielens");
  ASSERT_NE(trainer, nullptr);
  TrainOptions o;
  o.model = "movielens";
  o.data_dir = WriteToyMovieLens("ml_toy");
  o.output_dir = TestPath("ml_run");
  o.format = "json";
  o.batch_size = 200;
  o.epochs = 8;  // ~77 steps of NoisyAdam with the paper's sigma 0.6, C 5 and delta 1e-6;
  // learning rate 0.05 (paper: 0.01) so that the embeddings move in few steps.
  o.learning_rate = 0.05;
  testing::internal::CaptureStdout();
  const absl::Status status = trainer->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_GE(metrics.size(), 7u);
  const double first = metrics.front()["train_loss"].get<double>();
  const double last = metrics.back()["train_loss"].get<double>();
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
  // Predicting the mean rating (3) has RMSE 1.58 here (ratings 1, 2, 4, 5 equally often).
  // Runs at 5 epochs ended near 0.015.
  EXPECT_LT(metrics.back()["test_rmse"].get<double>(), 0.5);
  const int64_t n_train = std::lround(200 / metrics.back()["sampling_rate"].get<double>());
  // The documented split puts about 20 % of the 2,400 ratings in the test set.
  EXPECT_GT(n_train, 2400 * 0.75);
  EXPECT_LT(n_train, 2400 * 0.85);
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(),
                        200.0 / static_cast<double>(n_train), 0.6, 5.0, 1e-6);
}

// --resume keeps the checkpoint's sigma without its flag, refuses --target_epsilon and
// contradicting flags, and continues the one ledger.
TEST(MovieLensTrainerTest, ResumeContinuesTheSameLedgerAtTheCheckpointsSigma) {
  TrainOptions o;
  o.model = "movielens";
  o.data_dir = WriteToyMovieLens("ml_resume_data");
  o.output_dir = TestPath("ml_resume");
  o.format = "json";
  o.batch_size = 480;  // ~4 steps per epoch on ~1,920 training ratings
  o.epochs = 1;
  o.noise_multiplier = 0.8;
  testing::internal::CaptureStdout();
  ASSERT_TRUE(FindTrainer("movielens")->run(o).ok());
  o.epochs = 3;
  o.resume = true;
  o.noise_multiplier.reset();  // kept from the checkpoint, not the default 0.6
  o.target_epsilon = 5;
  const absl::Status recalibrate = FindTrainer("movielens")->run(o);
  EXPECT_EQ(recalibrate.code(), absl::StatusCode::kInvalidArgument) << recalibrate;
  EXPECT_NE(recalibrate.message().find("--target_epsilon"), std::string::npos) << recalibrate;
  o.target_epsilon.reset();
  // Flags that contradict the checkpoint are refused with one line naming the flag and the
  // checkpoint's value, and append nothing to the ledger.
  const size_t accounted = ReadJsonLines(o.output_dir + "/ledger.jsonl").size();
  auto expect_refused = [&](const TrainOptions& bad, const std::string& needle) {
    const absl::Status refused = FindTrainer("movielens")->run(bad);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_NE(refused.message().find(needle), std::string::npos) << refused;
    EXPECT_EQ(refused.message().find('\n'), std::string::npos) << refused;
  };
  TrainOptions bad = o;
  bad.noise_multiplier = 0.6;  // the model's default, not the checkpoint's
  expect_refused(bad, "--noise_multiplier=0.6 contradicts the checkpoint's noise_multiplier = 0.8");
  bad = o;
  bad.batch_size = 200;
  expect_refused(bad, "--batch_size=200 contradicts the checkpoint's batch_size = 480");
  bad = o;
  bad.clip_norm = 1.0;
  expect_refused(bad, "--clip_norm=1 contradicts the checkpoint's clip_norm = 5");
  bad = o;
  bad.delta = 1e-5;
  bad.given_flags.insert("delta");
  expect_refused(bad, "--delta=1e-05 contradicts the checkpoint's delta = 1e-06");
  bad = o;
  bad.extra_flags["clipping"] = "per_layer";
  bad.given_flags.insert("clipping");
  expect_refused(bad, "--clipping=per_layer contradicts the checkpoint's clipping");
  EXPECT_EQ(ReadJsonLines(o.output_dir + "/ledger.jsonl").size(), accounted);
  const absl::Status resumed = FindTrainer("movielens")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(resumed.ok()) << resumed;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 3u);
  const double n = 480 / metrics.back()["sampling_rate"].get<double>();
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), static_cast<int64_t>(std::ceil(3 * n / 480)));
  // The resumed run's epsilon accounts all steps of both runs, in the one ledger.
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(),
                        metrics.back()["sampling_rate"].get<double>(), 0.8, 5.0, 1e-6);
}

// --privacy_unit=user (McMahan et al. 2018): the 60 users of the toy data are the units.
// n, q and --batch_size count users (q = 6 / 60), every ledger step is a Poisson-sampled
// Gaussian over users with the per-user clip norm, and the reported epsilon is the
// record-level formula with n = 60 (ExpectLedgerAccounted computes it from
// DpSgdEvent(0.1, sigma, steps) directly).
TEST(MovieLensTrainerTest, UserLevelRunIsAccountedOverUsers) {
  TrainOptions o;
  o.model = "movielens";
  o.data_dir = WriteToyMovieLens("ml_user_data");
  o.output_dir = TestPath("ml_user_run");
  o.format = "json";
  o.batch_size = 6;  // expected users per step
  o.epochs = 2;
  o.extra_flags["privacy_unit"] = "user";
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("movielens")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics.back()["privacy_unit"], "user");
  EXPECT_DOUBLE_EQ(metrics.back()["sampling_rate"].get<double>(), 0.1);
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 20);  // ceil(2 * 60 / 6)
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(), 0.1, 0.6,
                        5.0, 1e-6);
  // User-level needs Poisson sampling of users and one record per user.
  o.output_dir = TestPath("ml_user_refused");
  o.extra_flags["sampler"] = "fixed_size";
  const absl::Status refused = FindTrainer("movielens")->run(o);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("--privacy_unit=user needs --sampler=poisson"),
            std::string::npos)
      << refused;
}

// --sampler=fixed_size: each step's ledger entry is SampledWithoutReplacement(n, B,
// Gaussian(sigma / 2)) (replace-one: a changed rating moves the clipped sum by up to 2C
// while the noise is sigma C); the report has the RDP bound (Wang, Balle, Kasiviswanathan
// 2019) of those steps, computed here from the event directly, and the PLD interval
// (replace-one, accounting/pld.h), whose lower bound on the mechanism is below that RDP
// bound; the headline is the smaller upper bound.
TEST(MovieLensTrainerTest, FixedSizeRunRecordsReplaceOneStepsAndIsAccountedByPldAndRdp) {
  TrainOptions o;
  o.model = "movielens";
  o.data_dir = WriteToyMovieLens("ml_fixed_data");
  o.output_dir = TestPath("ml_fixed_run");
  o.format = "json";
  o.batch_size = 400;
  o.epochs = 1;
  o.extra_flags["sampler"] = "fixed_size";
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("movielens")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  const nlohmann::json& last = metrics.back();
  EXPECT_EQ(last["sampler"], "fixed_size");
  const int64_t n = std::llround(400 / last["sampling_rate"].get<double>());
  const int64_t steps = last["step"].get<int64_t>();
  EXPECT_EQ(steps, (n + 399) / 400);
  const std::vector<nlohmann::json> ledger = ReadJsonLines(o.output_dir + "/ledger.jsonl");
  ASSERT_EQ(static_cast<int64_t>(ledger.size()), steps);
  const accounting::Event step_event =
      accounting::Event::SampledWithoutReplacement(n, 400, *accounting::Event::Gaussian(0.3))
          .value();
  for (const nlohmann::json& line : ledger) {
    ASSERT_EQ(line["type"], "event");
    EXPECT_EQ(accounting::Event::FromJson(line["event"]).value(), step_event);
  }
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  auto rdp = accounting::ComputeRdp(accounting::Event::SelfComposed(step_event, steps).value(),
                                    orders);
  ASSERT_TRUE(rdp.ok());
  auto eps = accounting::RdpToEpsilonOptimal(orders, *rdp, 1e-6);
  ASSERT_TRUE(eps.ok());
  EXPECT_NEAR(last["epsilon"]["rdp"]["epsilon"].get<double>(), eps->epsilon, 1e-9 * eps->epsilon);
  const nlohmann::json& pld = last["epsilon"]["pld"];
  ASSERT_TRUE(pld.contains("epsilon_upper")) << last["epsilon"];
  EXPECT_LE(pld["epsilon_lower"].get<double>(), eps->epsilon) << last["epsilon"];
  EXPECT_LE(pld["epsilon_lower"].get<double>(), pld["epsilon_upper"].get<double>());
  EXPECT_EQ(last["epsilon"]["headline"]["epsilon"].get<double>(),
            std::min(pld["epsilon_upper"].get<double>(), eps->epsilon))
      << last["epsilon"];
  // --resume keeps the checkpoint's sampler and continues the same ledger of events.
  TrainOptions resumed = o;
  resumed.epochs = 2;
  resumed.resume = true;
  resumed.extra_flags.erase("sampler");
  testing::internal::CaptureStdout();
  const absl::Status continued = FindTrainer("movielens")->run(resumed);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(continued.ok()) << continued;
  const nlohmann::json resumed_last = ReadJsonLines(o.output_dir + "/metrics.jsonl").back();
  EXPECT_EQ(resumed_last["sampler"], "fixed_size");
  EXPECT_EQ(resumed_last["step"].get<int64_t>(), 2 * steps);
  const std::vector<nlohmann::json> both = ReadJsonLines(o.output_dir + "/ledger.jsonl");
  ASSERT_EQ(static_cast<int64_t>(both.size()), 2 * steps);
  for (const nlohmann::json& line : both) {
    EXPECT_EQ(accounting::Event::FromJson(line["event"]).value(), step_event);
  }
  // --target_epsilon calibrates sigma by the same headline: the run's epsilon meets it.
  o.output_dir = TestPath("ml_fixed_target");
  o.target_epsilon = 2.0;
  testing::internal::CaptureStdout();
  const absl::Status calibrated = FindTrainer("movielens")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(calibrated.ok()) << calibrated;
  const nlohmann::json target_last = ReadJsonLines(o.output_dir + "/metrics.jsonl").back();
  EXPECT_LE(target_last["epsilon"]["headline"]["epsilon"].get<double>(), 2.0);
  EXPECT_GT(target_last["epsilon"]["headline"]["epsilon"].get<double>(), 1.9);
}

TEST(MovieLensTrainerTest, BadDataIsAOneLineError) {
  TrainOptions o;
  o.model = "movielens";
  o.data_dir = TestPath("no_such_ml");
  absl::Status status = FindTrainer("movielens")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("no_such_ml/ratings.dat"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;

  MakeTestDirectory(TestPath("ml_bad"));
  WriteTestFile("ml_bad/ratings.dat", "1::2::5::978300760\n1::3::7::978300761\n");
  o.data_dir = TestPath("ml_bad");
  status = FindTrainer("movielens")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("ratings.dat:2"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
}

}  // namespace
}  // namespace dpkit::models::wide
