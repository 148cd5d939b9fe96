// End to end: `dpkit train adult` on the small a9a-format files of testdata/adult
// (synthetic: 600 training / 200 test lines, 123 binary features, 42.5 % / 46 % positive).
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/wide/trainer_testing.h"
#include "dpkit/models/wide/wide_testing.h"
#include "nlohmann/json.hpp"

namespace dpkit::models::wide {
namespace {

constexpr char kData[] = "models/wide/testdata/adult";

TrainOptions AdultOptions(const std::string& run, const std::string& split) {
  TrainOptions o;
  o.model = "adult";
  o.data_dir = kData;
  o.output_dir = TestPath(run);
  o.format = "json";
  o.extra_flags = {{"adult_split", split}};
  return o;
}

// Runs `dpkit train adult` with its progress output swallowed.
absl::Status RunAdultQuietly(const TrainOptions& o) {
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("adult")->run(o);
  testing::internal::GetCapturedStdout();
  return status;
}

TEST(AdultTrainerTest, LearnsAndWritesAnAccountedLedgerWithJsonLines) {
  const TrainerInfo* trainer = FindTrainer("adult");
  ASSERT_NE(trainer, nullptr);
  TrainOptions o = AdultOptions("adult_run", "a9a");  // 600 train / 200 test
  o.batch_size = 60;   // q = 0.1, 10 steps per epoch
  o.epochs = 12;
  o.learning_rate = 0.5;  // the paper's sigma 0.55, C 1 and delta 1e-5
  testing::internal::CaptureStdout();
  const absl::Status status = trainer->run(o);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 12u);
  // --format=json prints exactly the metrics lines, one parseable object per epoch with
  // `epoch`, `test_accuracy` and the `epsilon` object of `dpkit epsilon`.
  std::istringstream lines(out);
  std::string line;
  for (size_t i = 0; i < metrics.size(); ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    const nlohmann::json printed = nlohmann::json::parse(line);
    EXPECT_EQ(printed, metrics[i]);
    EXPECT_TRUE(printed.at("epoch").is_number_integer()) << line;
    EXPECT_EQ(printed.at("epoch").get<int64_t>(), static_cast<int64_t>(i + 1));
    EXPECT_DOUBLE_EQ(printed.at("epochs_completed").get<double>(), static_cast<double>(i + 1));
    EXPECT_TRUE(printed.at("test_accuracy").is_number());
    EXPECT_TRUE(printed.at("epsilon").at("rdp").at("epsilon").is_number());
    EXPECT_TRUE(printed.at("epsilon").at("gdp").at("approximate").get<bool>());
  }
  EXPECT_FALSE(std::getline(lines, line)) << line;
  // Learning: 54 % of the test lines are negative; the labels of these files are a
  // function of the features; five runs at these settings ended at 81.5-85 %.
  EXPECT_GE(metrics.back()["test_accuracy"].get<double>(), 0.7);
  EXPECT_LT(metrics.back()["train_loss"].get<double>(), metrics.front()["train_loss"].get<double>());
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(), 0.1,
                        0.55, 1.0, 1e-5);
  for (const char* file : {"/model.pt", "/optimizer.pt", "/checkpoint.json"}) {
    EXPECT_TRUE(std::ifstream(o.output_dir + file).good()) << file;
  }
}

TEST(AdultTrainerTest, DefaultSplitIsTheLastOfTenFoldsOfA9aAsBuEtAl) {
  TrainOptions o = AdultOptions("adult_kfold", "kfold");
  o.max_steps = 2;
  const absl::Status status = RunAdultQuietly(o);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  // 600 lines: train on the first 540 (q = 256/540), test on the last 60, so the accuracy
  // is a multiple of 1/60; defaults are the paper's sigma 0.55 and C 1.
  EXPECT_DOUBLE_EQ(metrics[0]["sampling_rate"].get<double>(), 256.0 / 540.0);
  const double correct = metrics[0]["test_accuracy"].get<double>() * 60;
  EXPECT_NEAR(correct, std::round(correct), 1e-9);
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics[0],
                        256.0 / 540.0, 0.55, 1.0, 1e-5);
}

TEST(AdultTrainerTest, ResumeContinuesTheSameLedger) {
  TrainOptions o = AdultOptions("adult_resume", "a9a");
  o.batch_size = 150;  // 4 steps per epoch on 600 lines
  o.epochs = 1;
  o.noise_multiplier = 0.9;
  testing::internal::CaptureStdout();
  ASSERT_TRUE(FindTrainer("adult")->run(o).ok());
  o.epochs = 3;
  o.resume = true;
  o.noise_multiplier.reset();  // kept from the checkpoint, not the default 0.55
  o.target_epsilon = 5;
  const absl::Status recalibrate = FindTrainer("adult")->run(o);
  EXPECT_EQ(recalibrate.code(), absl::StatusCode::kInvalidArgument) << recalibrate;
  EXPECT_NE(recalibrate.message().find("--target_epsilon"), std::string::npos) << recalibrate;
  o.target_epsilon.reset();
  // Flags that contradict the checkpoint are refused; without them its settings hold.
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"clipping", "per_layer"}, {"microbatch_size", "2"}}) {
    TrainOptions bad = o;
    bad.extra_flags[flag] = value;
    bad.given_flags.insert(flag);
    const absl::Status refused = FindTrainer("adult")->run(bad);
    EXPECT_NE(refused.message().find("--" + flag + "=" + value + " contradicts the checkpoint's"),
              std::string::npos)
        << refused;
  }
  TrainOptions bad = o;
  bad.noise_multiplier = 0.55;
  EXPECT_NE(FindTrainer("adult")->run(bad).message().find(
                "--noise_multiplier=0.55 contradicts the checkpoint's noise_multiplier = 0.9"),
            std::string::npos);
  const absl::Status resumed = FindTrainer("adult")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(resumed.ok()) << resumed;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 12);
  // The resumed run's epsilon accounts all 12 steps of both runs, in the one ledger.
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(), 0.25,
                        0.9, 1.0, 1e-5);
}

TEST(AdultTrainerTest, TargetEpsilonCalibratesSigmaFromTheAccountant) {
  TrainOptions o = AdultOptions("adult_target", "a9a");
  o.batch_size = 60;
  o.epochs = 2;
  o.target_epsilon = 1.5;
  const absl::Status status = RunAdultQuietly(o);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  const double sigma = metrics.back()["noise_multiplier"].get<double>();
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(), 0.1,
                        sigma, 1.0, 1e-5);
  // Calibrated sigma meets the target and is within 0.1 % of the smallest sigma that does
  // (//accounting:calibrate), so the RDP epsilon of the 20 steps is just below 1.5.
  const double eps = metrics.back()["epsilon"]["rdp"]["epsilon"].get<double>();
  EXPECT_LE(eps, 1.5);
  EXPECT_GT(eps, 1.45);
}

// The privacy-step options of the shared loop (models/dp_step_options.h), through the
// cheapest of its trainers. Ledger and epsilon are checked as above: whatever the records
// (microbatch averages, per-layer or joint clipping), the collapsed noise multiplier of a
// step's queries is sigma (optim/clipping.h), so epsilon is that of DpSgdEvent(q, sigma, T).
TEST(AdultTrainerTest, MicrobatchesRecordSensitivityTwoCAtTheSameEpsilon) {
  TrainOptions o = AdultOptions("adult_micro", "a9a");
  o.batch_size = 60;
  o.epochs = 1;
  o.noise_multiplier = 1.1;
  o.extra_flags["microbatch_size"] = "4";
  o.extra_flags["physical_batch_size"] = "10";  // slices of whole microbatches
  o.given_flags.insert("physical_batch_size");
  const absl::Status status = RunAdultQuietly(o);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0]["microbatch_size"].get<int64_t>(), 4);
  // Queries {2C, 2 sigma C}: ExpectLedgerAccounted with clip norm 2C = 2.
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics[0], 0.1, 1.1,
                        2.0, 1e-5);
}

TEST(AdultTrainerTest, PerLayerAndJointClippingKeepTheCollapsedNoiseMultiplier) {
  for (const std::string mode : {"per_layer", "joint"}) {
    TrainOptions o = AdultOptions("adult_" + mode, "a9a");
    o.batch_size = 100;
    o.epochs = 1;
    o.noise_multiplier = 0.9;
    o.clip_norm = 2;
    o.extra_flags["clipping"] = mode;
    if (mode == "joint") {
      o.extra_flags["clipping_groups"] = "hidden;output";
      o.extra_flags["clipping_scales"] = "1,0.5";
    }
    const absl::Status status = RunAdultQuietly(o);
    ASSERT_TRUE(status.ok()) << mode << ": " << status;
    const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
    ASSERT_EQ(metrics.size(), 1u) << mode;
    const std::vector<nlohmann::json> ledger = ReadJsonLines(o.output_dir + "/ledger.jsonl");
    ASSERT_EQ(static_cast<int64_t>(ledger.size()), metrics[0]["step"].get<int64_t>()) << mode;
    if (mode == "joint") {
      // One query {C, sigma C} for the rescaled record (McMahan et al. 2018, Sec. 3).
      ExpectLedgerAccounted(ledger, metrics[0], 100.0 / 600, 0.9, 2.0, 1e-5);
      continue;
    }
    // per_layer: one query per layer {C / sqrt(2), sigma C}; collapsed
    // z = (sum_g (C_g / s_g)^2)^(-1/2) = sigma (McMahan et al. 2018, eq. (1)).
    for (const nlohmann::json& line : ledger) {
      ASSERT_EQ(line.at("queries").size(), 2u);
      double inverse_z2 = 0;
      for (const nlohmann::json& query : line["queries"]) {
        EXPECT_NEAR(query.at("clip_norm").get<double>(), 2 / std::sqrt(2.0), 1e-12);
        EXPECT_NEAR(query.at("noise_stddev").get<double>(), 0.9 * 2, 1e-12);
        inverse_z2 += std::pow(query["clip_norm"].get<double>() / query["noise_stddev"].get<double>(), 2);
      }
      EXPECT_NEAR(1 / std::sqrt(inverse_z2), 0.9, 1e-12);
    }
    auto event = accounting::DpSgdEvent(100.0 / 600, 0.9, metrics[0]["step"].get<int64_t>());
    ASSERT_TRUE(event.ok());
    const std::vector<double> orders = accounting::DefaultRdpOrders();
    auto rdp = accounting::ComputeRdp(*event, orders);
    ASSERT_TRUE(rdp.ok());
    auto eps = accounting::RdpToEpsilonOptimal(orders, *rdp, 1e-5);
    ASSERT_TRUE(eps.ok());
    EXPECT_NEAR(metrics[0]["epsilon"]["rdp"]["epsilon"].get<double>(), eps->epsilon,
                1e-9 * eps->epsilon);
  }
}

TEST(AdultTrainerTest, ShuffledBatchesWriteNoLedgerAndReportNoEpsilon) {
  TrainOptions o = AdultOptions("adult_shuffled", "a9a");
  o.batch_size = 160;  // floor(600 / 160) = 3 full batches per epoch
  o.epochs = 2;
  o.extra_flags["sampler"] = "shuffled";
  const absl::Status status = RunAdultQuietly(o);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 6);
  EXPECT_TRUE(metrics.back()["epsilon"].is_null());
  EXPECT_NE(metrics.back()["epsilon_note"].get<std::string>().find("not certified"),
            std::string::npos);
  EXPECT_EQ(metrics.back()["sampler"].get<std::string>(), "shuffled");
  EXPECT_FALSE(std::ifstream(o.output_dir + "/ledger.jsonl").good());
  // A Poisson resume of a shuffled run is refused (its steps are in no ledger).
  o.resume = true;
  o.epochs = 3;
  o.extra_flags["sampler"] = "poisson";
  o.given_flags.insert("sampler");
  const absl::Status resumed = FindTrainer("adult")->run(o);
  EXPECT_EQ(resumed.code(), absl::StatusCode::kInvalidArgument) << resumed;
  EXPECT_NE(resumed.message().find("--sampler=poisson contradicts the checkpoint's sampler = shuffled"),
            std::string::npos)
      << resumed;
}

TEST(AdultTrainerTest, BadStepOptionsAreOneLineErrorsNamingTheFlag) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"clipping", "ghost"}}, "--clipping must be flat, per_layer, joint or per_layer_dim"},
      {{{"clipping", "joint"}, {"clipping_groups", "hidden;nosuch"}, {"clipping_scales", "1,1"}},
       "unknown layer 'nosuch' (layers: hidden, output)"},
      {{{"clipping", "joint"}, {"clipping_groups", "hidden"}, {"clipping_scales", "1"}},
       "layer 'output' is in 0 groups"},
      {{{"clipping", "joint"}}, "--clipping=joint needs --clipping_scales"},
      {{{"clipping_scales", "1"}}, "need --clipping=joint"},
      {{{"microbatch_size", "61"}}, "--microbatch_size must be in [1, batch_size = 60]"},
      {{{"sampler", "random"}}, "--sampler must be poisson, fixed_size or shuffled"},
      {{{"sampler", "fixed_size"}, {"microbatch_size", "2"}},
       "--sampler=fixed_size needs --microbatch_size=1"},
      {{{"privacy_unit", "family"}}, "--privacy_unit must be example or user"},
      {{{"user_ids", "ids.txt"}}, "--user_ids needs --privacy_unit=user"},
      {{{"privacy_unit", "user"}}, "adult has no user column; give --user_ids"},
  };
  for (const auto& [flags, message] : cases) {
    TrainOptions o = AdultOptions("adult_bad_step", "a9a");
    o.batch_size = 60;
    o.max_steps = 1;
    for (const auto& [name, value] : flags) o.extra_flags[name] = value;
    const absl::Status status = RunAdultQuietly(o);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message << ": " << status;
    EXPECT_NE(status.message().find(message), std::string::npos) << status;
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
  }
  TrainOptions o = AdultOptions("adult_bad_step", "a9a");
  o.extra_flags["sampler"] = "shuffled";
  o.target_epsilon = 1;
  EXPECT_NE(FindTrainer("adult")->run(o).message().find("--target_epsilon needs --sampler=poisson"),
            std::string::npos);
}

// --privacy_unit=user with --user_ids on a model without a user column: 150 users of 4
// training examples each (example i belongs to user i mod 150, so a user's examples are
// spread over the file). n = 150 users, q = 15 / 150, one record per sampled user; the
// ledger is the Poisson-sampled Gaussian over users and epsilon its record-level value.
TEST(AdultTrainerTest, UserIdsFileMakesTheRunUserLevel) {
  const std::string ids = TestPath("adult_user_ids.txt");
  {
    std::ofstream out(ids);
    for (int i = 0; i < 600; ++i) out << (i % 150) << "\n";
  }
  TrainOptions o = AdultOptions("adult_user_run", "a9a");  // 600 training lines
  o.batch_size = 15;  // expected users per step
  o.epochs = 2;
  o.extra_flags["privacy_unit"] = "user";
  o.extra_flags["user_ids"] = ids;
  const absl::Status status = RunAdultQuietly(o);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics.back()["privacy_unit"], "user");
  EXPECT_DOUBLE_EQ(metrics.back()["sampling_rate"].get<double>(), 0.1);
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 20);  // ceil(2 * 150 / 15)
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(), 0.1, 0.55,
                        1.0, 1e-5);
  // A file with the wrong number of lines is refused before anything is written.
  {
    std::ofstream out(ids);
    out << "1\n2\n";
  }
  o.output_dir = TestPath("adult_user_bad");
  const absl::Status refused = RunAdultQuietly(o);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("has 2 lines; it needs one per training example (600)"),
            std::string::npos)
      << refused;
  o.extra_flags["user_ids"] = ids + ".missing";
  const absl::Status missing = RunAdultQuietly(o);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find("--user_ids: cannot read"), std::string::npos) << missing;
}

TEST(AdultTrainerTest, BadSplitAndMissingDataAreOneLineErrors) {
  TrainOptions o = AdultOptions("adult_bad", "random");
  absl::Status status = FindTrainer("adult")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--adult_split"), std::string::npos) << status;

  o = AdultOptions("adult_missing", "kfold");
  o.data_dir = TestPath("no_such_adult");
  status = FindTrainer("adult")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("no_such_adult/a9a"), std::string::npos) << status;
  EXPECT_NE(status.message().find("--data_dir"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;

  MakeTestDirectory(TestPath("adult_badline"));
  WriteTestFile("adult_badline/a9a", "+1 3:1 5:1\n-1 7:1 124:1\n");
  o.data_dir = TestPath("adult_badline");
  status = FindTrainer("adult")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("a9a:2"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
}

}  // namespace
}  // namespace dpkit::models::wide
