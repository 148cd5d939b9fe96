// --resume of the MNIST family (mnist, fashion-mnist, mnist-pca) restores the checkpoint's privacy settings (sigma, q and
// the batch size, clip norm, clipping mode / groups / scales, microbatching, sampler, delta)
// without their flags; a contradicting flag, --target_epsilon, a changed training set and
// damaged checkpoints are refused with one line (exit 2), never an abort (issue 21).
#include <signal.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/models/trainer_registry.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/training/training_testing.h"

namespace dpkit {
namespace {

using models::TrainOptions;
using training_testing::MakeMnistData;
using training_testing::ReadJsonLines;
using training_testing::TempDir;

absl::Status RunTrainer(const TrainOptions& o) {
  testing::internal::CaptureStdout();
  const absl::Status status = models::FindTrainer(o.model)->run(o);
  testing::internal::GetCapturedStdout();
  return status;
}

TrainOptions Base(const std::string& model, const std::string& name, const std::string& data) {
  TrainOptions o;
  o.model = model;
  o.data_dir = data;
  o.output_dir = TempDir() + "/" + name;
  o.epochs = 1;
  o.threads = 1;
  o.format = "json";
  o.test_subset = 20;
  return o;
}

// `flag` set to `value` as `dpkit train` would pass an extra flag.
void Give(TrainOptions* o, const std::string& flag, const std::string& value) {
  o->extra_flags[flag] = value;
  o->given_flags.insert(flag);
}

void ExpectRefused(const TrainOptions& o, const std::string& needle) {
  const absl::Status status = RunTrainer(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(needle), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
}

TEST(ResumeSettingsTest, MnistResumeKeepsTheCheckpointsPrivacySettingsWithoutTheFlags) {
  const std::string data = MakeMnistData("settings_data", 256, 20);
  TrainOptions fresh = Base("mnist", "settings", data);
  fresh.noise_multiplier = 2.0;
  fresh.clip_norm = 0.7;
  fresh.batch_size = 32;  // 8 steps per epoch
  fresh.delta = 1e-6;
  fresh.given_flags = {"noise_multiplier", "clip_norm", "batch_size", "delta"};
  Give(&fresh, "clipping", "per_layer");
  Give(&fresh, "microbatch_size", "2");
  fresh.max_steps = 4;
  ASSERT_TRUE(RunTrainer(fresh).ok());

  TrainOptions resume = Base("mnist", "settings", data);
  resume.resume = true;
  ASSERT_TRUE(RunTrainer(resume).ok());
  const std::vector<nlohmann::json> ledger = ReadJsonLines(resume.output_dir + "/ledger.jsonl");
  ASSERT_EQ(ledger.size(), 8u);
  for (const nlohmann::json& step : ledger) {
    // Per-layer clipping of the CNN's 4 layers, microbatches (sensitivity 2 C_g), sigma 2.
    EXPECT_EQ(step.at("sampling_rate"), ledger[0].at("sampling_rate"));
    EXPECT_DOUBLE_EQ(step.at("sampling_rate").get<double>(), 32.0 / 256);
    ASSERT_EQ(step.at("queries").size(), 4u);
    EXPECT_DOUBLE_EQ(step["queries"][0].at("clip_norm").get<double>(), 2 * 0.7 / 2);
    EXPECT_DOUBLE_EQ(step["queries"][0].at("noise_stddev").get<double>(), 2.0 * 2 * 0.7);
  }
  const nlohmann::json last = ReadJsonLines(resume.output_dir + "/metrics.jsonl").back();
  EXPECT_EQ(last.at("step"), 8);
  EXPECT_DOUBLE_EQ(last.at("noise_multiplier").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(last.at("delta").get<double>(), 1e-6);
  EXPECT_EQ(last.at("microbatch_size"), 2);

  // Flags that contradict the checkpoint are refused, naming the flag and its value.
  TrainOptions bad = resume;
  bad.noise_multiplier = 1.0;
  bad.given_flags.insert("noise_multiplier");
  ExpectRefused(bad, "--noise_multiplier=1 contradicts the checkpoint's noise_multiplier = 2");
  bad = resume;
  bad.clip_norm = 1.5;
  ExpectRefused(bad, "--clip_norm=1.5 contradicts the checkpoint's clip_norm = 0.7");
  bad = resume;
  bad.batch_size = 64;
  ExpectRefused(bad, "--batch_size=64 contradicts the checkpoint's batch_size = 32");
  bad = resume;
  bad.delta = 1e-5;
  bad.given_flags.insert("delta");
  ExpectRefused(bad, "--delta=1e-05 contradicts the checkpoint's delta = 1e-06");
  bad = resume;
  Give(&bad, "clipping", "flat");
  ExpectRefused(bad, "--clipping=flat contradicts the checkpoint's clipping = per_layer");
  bad = resume;
  Give(&bad, "microbatch_size", "1");
  ExpectRefused(bad, "--microbatch_size=1 contradicts the checkpoint's microbatch_size = 2");
  bad = resume;
  Give(&bad, "sampler", "shuffled");
  ExpectRefused(bad, "--sampler=shuffled contradicts the checkpoint's sampler = poisson");
  bad = resume;
  bad.target_epsilon = 5;
  ExpectRefused(bad, "--target_epsilon cannot be combined with --resume");
  bad = resume;
  bad.train_subset = 200;  // q = 32/200
  ExpectRefused(bad, "differs from the checkpoint's");
  // Flags equal to the checkpoint's are fine; the refused runs changed nothing.
  TrainOptions same = resume;
  same.noise_multiplier = 2.0;
  same.given_flags.insert("noise_multiplier");
  Give(&same, "clipping", "per_layer");
  same.epochs = 1.5;
  ASSERT_TRUE(RunTrainer(same).ok());
  EXPECT_EQ(ReadJsonLines(resume.output_dir + "/ledger.jsonl").size(), 12u);
}

// Fashion-MNIST (its own trainer registration and data files): killed mid-epoch after its
// first checkpoint, resumed without the privacy flags; contradicting flags are refused and
// change nothing; the ledger accounts every applied step, and the lost ones once more.
TEST(ResumeSettingsTest, FashionMnistKilledAndResumedKeepsItsSettingsAndAccountsEveryStep) {
  const std::string data = training_testing::MakeFashionMnistData("fashion_data", 256, 20);
  TrainOptions fresh = Base("fashion-mnist", "fashion", data);
  fresh.noise_multiplier = 1.7;
  fresh.clip_norm = 0.9;
  fresh.batch_size = 32;  // 8 steps per epoch
  fresh.epochs = 2;
  fresh.given_flags = {"noise_multiplier", "clip_norm", "batch_size"};
  // Killed after step 11's ledger entry: steps 0-7 checkpointed, 8-11 accounted and lost.
  ASSERT_EQ(training_testing::RunInChild(
                fresh, training_testing::KillAt(models::FaultPoint::kLedgerAppended, 11)),
            -SIGKILL);
  const std::string ledger_path = fresh.output_dir + "/ledger.jsonl";
  ASSERT_EQ(ReadJsonLines(ledger_path).size(), 12u);

  TrainOptions resume = Base("fashion-mnist", "fashion", data);
  resume.epochs = 2;
  resume.resume = true;
  TrainOptions bad = resume;
  bad.noise_multiplier = 1.3;
  bad.given_flags.insert("noise_multiplier");
  ExpectRefused(bad, "--noise_multiplier=1.3 contradicts the checkpoint's noise_multiplier = 1.7");
  bad = resume;
  bad.clip_norm = 1.5;
  ExpectRefused(bad, "--clip_norm=1.5 contradicts the checkpoint's clip_norm = 0.9");
  bad = resume;
  bad.batch_size = 256;
  ExpectRefused(bad, "--batch_size=256 contradicts the checkpoint's batch_size = 32");
  EXPECT_EQ(ReadJsonLines(ledger_path).size(), 12u);  // the refused runs appended nothing

  ASSERT_TRUE(RunTrainer(resume).ok());
  const std::vector<nlohmann::json> ledger = ReadJsonLines(ledger_path);
  ASSERT_EQ(ledger.size(), 16u + 4u);  // steps 0-15 once, 8-11 again (over-counting is safe)
  for (const nlohmann::json& step : ledger) {
    EXPECT_DOUBLE_EQ(step.at("sampling_rate").get<double>(), 32.0 / 256);
    ASSERT_EQ(step.at("queries").size(), 1u);
    EXPECT_DOUBLE_EQ(step["queries"][0].at("clip_norm").get<double>(), 0.9);
    EXPECT_DOUBLE_EQ(step["queries"][0].at("noise_stddev").get<double>(), 1.7 * 0.9);
  }
  const nlohmann::json last = ReadJsonLines(resume.output_dir + "/metrics.jsonl").back();
  EXPECT_EQ(last.at("step"), 16);
  EXPECT_DOUBLE_EQ(last.at("noise_multiplier").get<double>(), 1.7);
}

TEST(ResumeSettingsTest, JointClippingGroupsAndScalesAreRestored) {
  const std::string data = MakeMnistData("joint_data", 128, 20);
  TrainOptions fresh = Base("mnist", "joint", data);
  fresh.batch_size = 32;
  Give(&fresh, "clipping", "joint");
  Give(&fresh, "clipping_groups", "conv1,conv2;fc1,fc2");
  Give(&fresh, "clipping_scales", "1,0.5");
  fresh.max_steps = 2;
  ASSERT_TRUE(RunTrainer(fresh).ok());
  TrainOptions resume = Base("mnist", "joint", data);
  resume.resume = true;
  ASSERT_TRUE(RunTrainer(resume).ok());  // without --clipping: joint, with its groups and scales
  const std::vector<nlohmann::json> ledger = ReadJsonLines(resume.output_dir + "/ledger.jsonl");
  ASSERT_EQ(ledger.size(), 4u);
  for (const nlohmann::json& step : ledger) EXPECT_EQ(step.at("queries"), ledger[0].at("queries"));
  Give(&resume, "clipping_scales", "1,0.25");
  ExpectRefused(resume, "--clipping_scales=1,0.25 contradicts the checkpoint's clipping_scales = 1,0.5");
}

TEST(ResumeSettingsTest, MnistPcaResumesWithItsProjectionAndOnePcaEvent) {
  const std::string data = MakeMnistData("pca_data", 128, 20);
  TrainOptions fresh = Base("mnist-pca", "pca", data);
  fresh.batch_size = 32;  // 4 steps per epoch
  fresh.max_steps = 2;
  ASSERT_TRUE(RunTrainer(fresh).ok());
  TrainOptions resume = Base("mnist-pca", "pca", data);
  resume.resume = true;
  ASSERT_TRUE(RunTrainer(resume).ok());
  const std::vector<nlohmann::json> ledger = ReadJsonLines(resume.output_dir + "/ledger.jsonl");
  ASSERT_EQ(ledger.size(), 5u);
  EXPECT_EQ(ledger[0].at("type"), "event");  // DP-PCA, once
  for (size_t i = 1; i < ledger.size(); ++i) {
    EXPECT_EQ(ledger[i].at("type"), "sample");
    EXPECT_DOUBLE_EQ(ledger[i]["queries"][0].at("noise_stddev").get<double>(), 4.0 * 4.0);
  }
}

TEST(ResumeSettingsTest, DamagedCheckpointsAreOneLineErrorsNotAborts) {
  const std::string data = MakeMnistData("damaged_data", 128, 20);
  TrainOptions fresh = Base("mnist", "damaged", data);
  fresh.batch_size = 32;
  fresh.max_steps = 2;
  ASSERT_TRUE(RunTrainer(fresh).ok());
  TrainOptions resume = fresh;
  resume.max_steps.reset();
  resume.resume = true;
  const std::string dir = fresh.output_dir;
  std::ifstream in(dir + "/checkpoint.json");
  const nlohmann::json checkpoint = nlohmann::json::parse(in);
  auto expect_one_line = [&](absl::StatusCode code, const std::string& needle) {
    const absl::Status status = RunTrainer(resume);
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_NE(status.message().find(needle), std::string::npos) << status;
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
  };
  nlohmann::json wrong_type = checkpoint;
  wrong_type["next_step"] = "10";
  std::ofstream(dir + "/checkpoint.json", std::ios::trunc) << wrong_type.dump();
  expect_one_line(absl::StatusCode::kInvalidArgument, "next_step");
  std::ofstream(dir + "/checkpoint.json", std::ios::trunc) << "{\"next_step\": 2";
  expect_one_line(absl::StatusCode::kInvalidArgument, "not a dpkit checkpoint");
  nlohmann::json ahead = checkpoint;
  ahead["next_step"] = 3;  // more updates than ledger_steps
  std::ofstream(dir + "/checkpoint.json", std::ios::trunc) << ahead.dump();
  expect_one_line(absl::StatusCode::kInvalidArgument, "do not cover next_step 3");
  std::ofstream(dir + "/checkpoint.json", std::ios::trunc) << checkpoint.dump();
  std::string model;
  {
    std::ifstream model_in(dir + "/model.pt", std::ios::binary);
    model.assign(std::istreambuf_iterator<char>(model_in), {});
  }
  std::ofstream(dir + "/model.pt", std::ios::binary | std::ios::trunc) << model.substr(0, model.size() / 2);
  expect_one_line(absl::StatusCode::kInvalidArgument, "model.pt cannot be read");
  std::remove((dir + "/model.pt").c_str());
  expect_one_line(absl::StatusCode::kNotFound, "model.pt is missing");
  std::ofstream(dir + "/model.pt", std::ios::binary) << model;
  ASSERT_TRUE(RunTrainer(resume).ok());  // the intact checkpoint resumes
}

TEST(ResumeSettingsTest, AHugeTargetEpsilonReportsTheFiniteCertifiedBound) {
  const std::string data = MakeMnistData("huge_data", 64, 10);
  TrainOptions o = Base("mnist", "", data);
  o.output_dir.clear();
  o.format = "text";
  o.batch_size = 16;
  o.max_steps = 2;
  o.target_epsilon = 1e308;
  testing::internal::CaptureStdout();
  const absl::Status status = models::FindTrainer("mnist")->run(o);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const size_t at = out.find("eps <= ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_TRUE(std::isfinite(std::stod(out.substr(at + 7)))) << out;
}

}  // namespace
}  // namespace dpkit
