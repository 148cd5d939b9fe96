// End-to-end: `dpkit train mnist` on small synthetic idx files (written here, so the test
// is hermetic and fast): outputs, ledger, metrics, checkpoint, resume and bad input.
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace {

using nlohmann::json;
using dpkit::testing::CliRun;
using dpkit::testing::Dpkit;
using dpkit::testing::DpkitPath;
using dpkit::testing::Lines;
using dpkit::testing::ReadFile;
using dpkit::testing::TempDir;

void WriteIdx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
              const std::vector<uint8_t>& body) {
  std::ofstream out(path, std::ios::binary);
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.put(static_cast<char>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

// MNIST-format files where class k lights up rows 2k..2k+2 (learnable, deterministic).
std::string MakeData(const std::string& name, int train, int test, bool truncate = false) {
  std::string dir = TempDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  for (auto [split, n] : {std::pair<std::string, int>{"train", train}, {"t10k", test}}) {
    std::vector<uint8_t> pixels(static_cast<size_t>(n) * 784, 0), labels(n);
    for (int i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int r = 2 * labels[i] + 3; r < 2 * labels[i] + 6; ++r) {
        for (int c = 4; c < 24; ++c) pixels[static_cast<size_t>(i) * 784 + r * 28 + c] = 255;
      }
    }
    if (truncate && split == "train") pixels.resize(pixels.size() - 100);
    WriteIdx(dir + "/" + split + "-images-idx3-ubyte", 0x803,
             {static_cast<uint32_t>(n), 28, 28}, pixels);
    WriteIdx(dir + "/" + split + "-labels-idx1-ubyte", 0x801, {static_cast<uint32_t>(n)}, labels);
  }
  return dir;
}

TEST(TrainE2eTest, TrainsWritesLedgerMetricsCheckpointAndResumes) {
  std::string data = MakeData("data", 512, 100);
  std::string out = TempDir() + "/run";
  std::string common = "train mnist --data_dir=" + data + " --output_dir=" + out +
                       " --batch_size=64 --epochs=1 --threads=1 --format=json";
  CliRun first = Dpkit(common + " --max_steps=6");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::vector<std::string> lines = Lines(first.out);
  ASSERT_EQ(lines.size(), 1u) << first.out;  // max_steps stops mid-epoch: one final record
  json epoch = json::parse(lines[0]);
  // "epoch" is the integer epoch number (the E of "epoch E/N"); the fraction is separate.
  EXPECT_TRUE(epoch["epoch"].is_number_integer()) << lines[0];
  EXPECT_EQ(epoch["epoch"].get<int64_t>(), 1);
  EXPECT_DOUBLE_EQ(epoch["epochs_completed"].get<double>(), 6.0 / 8.0);
  double accuracy = epoch["test_accuracy"].get<double>();
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  double eps1 = epoch["epsilon"]["rdp"]["epsilon"].get<double>();
  EXPECT_TRUE(std::isfinite(eps1) && eps1 > 0) << lines[0];
  EXPECT_TRUE(epoch["epsilon"]["gdp"]["approximate"].get<bool>());
  EXPECT_EQ(Lines(ReadFile(out + "/ledger.jsonl")).size(), 6u);
  EXPECT_EQ(Lines(ReadFile(out + "/metrics.jsonl")).size(), 1u);
  json ledger0 = json::parse(Lines(ReadFile(out + "/ledger.jsonl"))[0]);
  EXPECT_EQ(ledger0["type"], "sample");
  EXPECT_DOUBLE_EQ(ledger0["sampling_rate"].get<double>(), 64.0 / 512);
  EXPECT_DOUBLE_EQ(ledger0["queries"][0]["noise_stddev"].get<double>(), 1.3 * 1.5);
  EXPECT_EQ(json::parse(ReadFile(out + "/checkpoint.json"))["next_step"], 6);

  // Resume: continues at step 6, appends to the same ledger; epsilon grows.
  CliRun second = Dpkit(common + " --max_steps=8 --resume");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(Lines(ReadFile(out + "/ledger.jsonl")).size(), 8u);
  EXPECT_EQ(Lines(ReadFile(out + "/metrics.jsonl")).size(), 2u);
  json last = json::parse(Lines(second.out).back());
  EXPECT_TRUE(last["epoch"].is_number_integer());
  EXPECT_EQ(last["epoch"].get<int64_t>(), 1);
  EXPECT_DOUBLE_EQ(last["epochs_completed"].get<double>(), 1.0);
  EXPECT_GT(last["epsilon"]["rdp"]["epsilon"].get<double>(), eps1);
  // The ledger alone gives the same epsilon through `dpkit ledger`: the same certified PLD
  // bound and the same RDP bound (both use the optimal conversion, Asoodeh et al. 2021),
  // no smaller than the PLD lower bound (every upper bound lies above the true epsilon).
  CliRun pld = Dpkit("ledger " + out + "/ledger.jsonl --delta=1e-5 --accountant=pld --format=json");
  ASSERT_EQ(pld.exit_code, 0) << pld.err;
  ASSERT_TRUE(last["epsilon"].contains("pld")) << last.dump();
  EXPECT_NEAR(json::parse(pld.out)["pld"]["epsilon"].get<double>(),
              last["epsilon"]["pld"]["epsilon"].get<double>(), 1e-9);
  CliRun accounted = Dpkit("ledger " + out + "/ledger.jsonl --delta=1e-5 --accountant=rdp --format=json");
  ASSERT_EQ(accounted.exit_code, 0) << accounted.err;
  double ledger_rdp = json::parse(accounted.out)["rdp"]["epsilon"].get<double>();
  EXPECT_NEAR(ledger_rdp, last["epsilon"]["rdp"]["epsilon"].get<double>(), 1e-9);
  EXPECT_GE(ledger_rdp, last["epsilon"]["pld"]["epsilon_lower"].get<double>());
}

int64_t SampleLines(const std::string& ledger) {
  int64_t n = 0;
  for (const std::string& line : Lines(ReadFile(ledger))) {
    const json entry = json::parse(line, nullptr, false);
    if (!entry.is_discarded() && entry.value("type", "") == "sample") ++n;
  }
  return n;
}

// Starts `dpkit ARGS` and kills it with SIGKILL once its ledger holds between `low` and
// `high` steps (a fresh run mid-way); returns whether it was killed (false: it exited).
bool StartAndKillMidRun(const std::string& args, const std::string& ledger, int64_t low,
                        int64_t high) {
  const std::string command = "exec " + DpkitPath() + " " + args + " >/dev/null 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int polls = 0; polls < 60000; ++polls) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    const int64_t steps = SampleLines(ledger);
    if (steps >= low && steps < high) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return true;
}

// Issue 21, soundness item 1, through the command line: a run with --max_steps, then a
// fresh run in the same directory killed with SIGKILL mid-way, then --resume. The code
// before the training engine let the fresh run delete the ledger but keep the old
// checkpoint, and --resume trained the old model beside the new, shorter ledger.
TEST(TrainE2eTest, KilledFreshRunThenResumeNeverUnderCountsTheLedger) {
  std::string data = MakeData("data_issue21", 512, 20);
  std::string out = TempDir() + "/issue21";
  std::string ledger = out + "/ledger.jsonl";
  std::string common = "train mnist --data_dir=" + data + " --output_dir=" + out +
                       " --batch_size=16 --epochs=3 --threads=1 --format=json --test_subset=20";
  ASSERT_EQ(Dpkit(common + " --max_steps=48").exit_code, 0);
  ASSERT_EQ(SampleLines(ledger), 48);
  // The fresh run (no --max_steps) in the same directory, killed after ~10 of its steps
  // if it runs at all (32 steps per epoch: before its first checkpoint).
  StartAndKillMidRun(common, ledger, 8, 30);
  CliRun resumed = Dpkit(common + " --resume");
  std::ifstream in(out + "/checkpoint.json");
  ASSERT_TRUE(in.good());
  const json checkpoint = json::parse(in);
  // Every update of the saved model is in the ledger.
  EXPECT_GE(SampleLines(ledger), checkpoint["next_step"].get<int64_t>()) << resumed.err;
  if (resumed.exit_code == 0) {
    EXPECT_EQ(checkpoint["next_step"], 96);
  }

  // With --overwrite the fresh run removes the old checkpoint before its ledger starts;
  // killed mid-way, it leaves nothing to resume.
  EXPECT_TRUE(StartAndKillMidRun(common + " --overwrite", ledger, 8, 30));
  EXPECT_FALSE(std::ifstream(out + "/checkpoint.json").good());
  CliRun refused = Dpkit(common + " --resume");
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_EQ(Lines(refused.err).size(), 1u) << refused.err;
}

TEST(TrainE2eTest, TargetEpsilonCalibratesTheNoise) {
  std::string data = MakeData("data2", 256, 50);
  CliRun run = Dpkit("train mnist --data_dir=" + data +
                     " --batch_size=32 --epochs=1 --max_steps=3 --threads=1 --format=json"
                     " --target_epsilon=3");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json epoch = json::parse(Lines(run.out).back());
  // 3 of the 8 planned steps ran: epsilon is below the target set for all 8.
  EXPECT_LE(epoch["epsilon"]["rdp"]["epsilon"].get<double>(), 3.0);
  EXPECT_GT(epoch["noise_multiplier"].get<double>(), 0.3);
}

TEST(TrainE2eTest, TextFormatShowsProgressAndEpsilon) {
  std::string data = MakeData("data3", 128, 20);
  CliRun run = Dpkit("train mnist --data_dir=" + data +
                     " --batch_size=32 --epochs=1 --threads=1 --optimizer=adam");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("test accuracy"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("RDP"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("approximate"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("loss"), std::string::npos) << run.err;
}

TEST(TrainE2eTest, MicrobatchesRecordSensitivityTwoCAndKeepTheNoiseMultiplier) {
  std::string data = MakeData("data5", 256, 20);
  std::string out = TempDir() + "/micro";
  // Physical batches of 8 hold whole microbatches of ~4: the split is exercised.
  CliRun run = Dpkit("train mnist --data_dir=" + data + " --output_dir=" + out +
                     " --batch_size=32 --epochs=1 --max_steps=3 --threads=1 --format=json"
                     " --microbatch_size=4 --physical_batch_size=8");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> ledger = Lines(ReadFile(out + "/ledger.jsonl"));
  ASSERT_EQ(ledger.size(), 3u);
  json step = json::parse(ledger[0]);
  ASSERT_EQ(step["queries"].size(), 1u);
  // Sensitivity 2C = 3 and noise 2 sigma C = 3.9: noise multiplier still 1.3.
  EXPECT_DOUBLE_EQ(step["queries"][0]["clip_norm"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(step["queries"][0]["noise_stddev"].get<double>(), 1.3 * 3.0);
  json epoch = json::parse(Lines(run.out).back());
  EXPECT_EQ(epoch["microbatch_size"], 4);
  EXPECT_TRUE(std::isfinite(epoch["epsilon"]["rdp"]["epsilon"].get<double>()));
}

TEST(TrainE2eTest, JointClippingRecordsOneSumQuery) {
  std::string data = MakeData("data6", 128, 20);
  std::string out = TempDir() + "/joint";
  CliRun run = Dpkit("train mnist --data_dir=" + data + " --output_dir=" + out +
                     " --batch_size=32 --epochs=1 --max_steps=2 --threads=1 --format=json"
                     " --clipping=joint '--clipping_groups=conv1,conv2;fc1,fc2'"
                     " --clipping_scales=1,0.5");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json step = json::parse(Lines(ReadFile(out + "/ledger.jsonl"))[0]);
  ASSERT_EQ(step["queries"].size(), 1u);
  EXPECT_DOUBLE_EQ(step["queries"][0]["clip_norm"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(step["queries"][0]["noise_stddev"].get<double>(), 1.3 * 1.5);
}

TEST(TrainE2eTest, ShuffledSamplerReportsNoCertifiedEpsilonAndWritesNoLedger) {
  std::string data = MakeData("data7", 128, 20);
  std::string out = TempDir() + "/shuffled";
  CliRun run = Dpkit("train mnist --data_dir=" + data + " --output_dir=" + out +
                     " --batch_size=32 --epochs=1 --threads=1 --format=json --sampler=shuffled");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json epoch = json::parse(Lines(run.out).back());
  EXPECT_TRUE(epoch["epsilon"].is_null()) << run.out;
  EXPECT_NE(epoch["epsilon_note"].get<std::string>().find("not certified"), std::string::npos);
  EXPECT_EQ(epoch["step"], 4);  // floor(128 / 32) fixed-size batches
  EXPECT_FALSE(std::ifstream(out + "/ledger.jsonl").good());
  CliRun text = Dpkit("train mnist --data_dir=" + data +
                      " --batch_size=32 --epochs=1 --threads=1 --sampler=shuffled");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("not certified"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("eps <="), std::string::npos) << text.out;
}

// --train_metrics=private (models/train_metrics.h): each epoch's release is one ledger event,
// PoissonSampled(q_m, Gaussian(z / sqrt(2))), appended before the epoch's line, so the
// epoch's certified epsilon covers it; nothing computed from the training data without
// noise is printed.
TEST(TrainE2eTest, PrivateTrainMetricsAreReleasedThroughTheLedger) {
  std::string data = MakeData("data_metrics", 128, 20);
  std::string out = TempDir() + "/metrics";
  CliRun run = Dpkit("train mnist --data_dir=" + data + " --output_dir=" + out +
                     " --batch_size=32 --epochs=2 --threads=1 --format=json"
                     " --train_metrics=private --train_metrics_sampling_rate=0.5"
                     " --train_metrics_noise=2 --train_metrics_loss_bound=3");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> ledger = Lines(ReadFile(out + "/ledger.jsonl"));
  ASSERT_EQ(ledger.size(), 10u);  // 4 steps, 1 release, 4 steps, 1 release
  for (size_t i : {4u, 9u}) {
    json entry = json::parse(ledger[i]);
    ASSERT_EQ(entry["type"], "event") << ledger[i];
    EXPECT_EQ(entry["event"]["type"], "poisson_sampled");
    EXPECT_EQ(entry["event"]["sampling_rate"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(entry["event"]["event"]["noise_multiplier"].get<double>(), 2 / std::sqrt(2.0));
  }
  std::vector<std::string> epochs = Lines(run.out);
  ASSERT_EQ(epochs.size(), 2u);
  json last = json::parse(epochs.back());
  EXPECT_EQ(last["train_metrics"], "private");
  EXPECT_FALSE(last.contains("train_loss")) << epochs.back();
  EXPECT_FALSE(last.contains("train_accuracy")) << epochs.back();
  // Noise standard deviations z C / (q_m n): 2 * 3 / 64 and 2 / 64.
  EXPECT_DOUBLE_EQ(last["train_loss_dp_stddev"].get<double>(), 6.0 / 64);
  EXPECT_DOUBLE_EQ(last["train_accuracy_dp_stddev"].get<double>(), 2.0 / 64);
  // The epoch's epsilon is that of the whole ledger, releases included: the same file
  // without them certifies strictly less.
  const double reported = last["epsilon"]["rdp"]["epsilon"].get<double>();
  CliRun whole = Dpkit("ledger " + out + "/ledger.jsonl --accountant=rdp --format=json");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_DOUBLE_EQ(json::parse(whole.out)["rdp"]["epsilon"].get<double>(), reported);
  std::string steps_only;
  for (size_t i = 0; i < ledger.size(); ++i) {
    if (i != 4 && i != 9) steps_only += ledger[i] + "\n";
  }
  {
    std::ofstream file(out + "/steps_only.jsonl");
    file << steps_only;
  }
  CliRun fewer = Dpkit("ledger " + out + "/steps_only.jsonl --accountant=rdp --format=json");
  ASSERT_EQ(fewer.exit_code, 0) << fewer.err;
  EXPECT_LT(json::parse(fewer.out)["rdp"]["epsilon"].get<double>(), reported);
  // Text: the DP estimates, and no exact training loss, accuracy or examples per second.
  CliRun text = Dpkit("train mnist --data_dir=" + data +
                      " --batch_size=32 --epochs=1 --threads=1 --train_metrics=private");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("DP train loss"), std::string::npos) << text.out;
  EXPECT_EQ(text.err.find("loss"), std::string::npos) << text.err;
  EXPECT_EQ(text.err.find("ex/s"), std::string::npos) << text.err;
}

TEST(TrainE2eTest, NonPrivateTrainMetricsAreLabelled) {
  std::string data = MakeData("data_metrics2", 64, 10);
  CliRun run = Dpkit("train mnist --data_dir=" + data + " --batch_size=16 --epochs=1 --threads=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("(not private)"), std::string::npos) << run.out;
}

// --target_epsilon with private metrics calibrates sigma for the steps AND the planned
// releases: the run ends within the target, with more noise than without the releases.
TEST(TrainE2eTest, TargetEpsilonCountsThePrivateTrainMetrics) {
  std::string data = MakeData("data_metrics3", 256, 10);
  const std::string common = "train mnist --data_dir=" + data +
                             " --batch_size=32 --epochs=2 --threads=1 --format=json"
                             " --target_epsilon=3";
  CliRun with = Dpkit(common + " --train_metrics=private --train_metrics_noise=3");
  CliRun without = Dpkit(common);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  json a = json::parse(Lines(with.out).back()), b = json::parse(Lines(without.out).back());
  EXPECT_LE(a["epsilon"]["rdp"]["epsilon"].get<double>(), 3.0);
  EXPECT_GT(a["noise_multiplier"].get<double>(), b["noise_multiplier"].get<double>());
}

TEST(TrainE2eTest, BadInputExitsTwoWithOneLine) {
  std::string data = MakeData("data4", 64, 10);
  std::string truncated = MakeData("bad", 64, 10, /*truncate=*/true);
  for (const std::string& args :
       {std::string("train mnist --noise_multiplier=-1"), std::string("train nosuchmodel"),
        std::string("train"), std::string("train mnist --pca_noise_multiplier=2"),
        std::string("train mnist --noise_multiplier=1 --target_epsilon=1"),
        std::string("train mnist --delta=2"), std::string("train mnist --optimizer=rmsprop"),
        "train mnist --data_dir=" + data + " --batch_size=1000",
        "train mnist --data_dir=" + data + " --batch_size=16 --microbatch_size=0",
        "train mnist --data_dir=" + data + " --batch_size=16 --microbatch_size=17",
        "train mnist --data_dir=" + data + " --batch_size=16 --sampler=random",
        "train mnist --data_dir=" + data + " --batch_size=16 --sampler=shuffled --target_epsilon=1",
        "train mnist --data_dir=" + data + " --batch_size=16 --clipping=joint",
        "train mnist --data_dir=" + data + " --batch_size=16 --clipping_scales=1",
        "train mnist --data_dir=" + data + " --batch_size=16 --clipping=joint --clipping_scales=1,2",
        "train mnist --data_dir=" + data + " --batch_size=16 --clipping=joint '--clipping_groups=conv1;nosuch' --clipping_scales=1,1",
        "train mnist --data_dir=" + data + " --batch_size=16 --clipping=joint --clipping_groups=conv1 --clipping_scales=1",
        "train mnist --data_dir=" + data + " --batch_size=16 --clipping=joint --clipping_scales=1,1,1,-1",
        "train mnist --data_dir=" + data + " --batch_size=16 --physical_batch_size=0",
        "train mnist --data_dir=" + data + " --batch_size=16 --train_metrics=exact",
        "train mnist --data_dir=" + data + " --batch_size=16 --train_metrics_noise=0.01",
        "train mnist --data_dir=" + data + " --batch_size=16 --train_metrics_sampling_rate=2",
        "train mnist --data_dir=" + data + " --batch_size=16 --train_metrics=private --sampler=fixed_size",
        "train mnist --data_dir=" + data + " --batch_size=16 --train_metrics=private --sampler=shuffled",
        std::string("train mnist --learning_rate=1e308"), std::string("train mnist --clip_norm=1e308"),
        std::string("train mnist --noise_multiplier=1e308"), std::string("train mnist --learning_rate=inf"),
        "train mnist --data_dir=" + truncated,
        "train mnist --data_dir=" + TempDir() + "/nowhere"}) {
    CliRun run = Dpkit(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.err;
    EXPECT_EQ(Lines(run.err).size(), 1u) << args << "\n" << run.err;
  }
  CliRun run = Dpkit("train mnist --data_dir=" + truncated);
  EXPECT_NE(run.err.find("truncated"), std::string::npos) << run.err;
}

}  // namespace
