// End to end: `dpkit train imdb` on a small aclImdb-format folder written here, whose
// reviews carry an easy signal (positive reviews use positive words, negative ones negative
// words, both on top of shared filler words).
#include <signal.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/models/engine/checkpoint.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/tests/training/training_testing.h"
#include "dpkit/models/wide/trainer_testing.h"
#include "dpkit/models/wide/wide_testing.h"
#include "nlohmann/json.hpp"

namespace dpkit::models::wide {
namespace {

// aclImdb/{train,test}/{pos,neg}/<i>_<rating>.txt with `per_class` reviews each.
std::string WriteToyImdb(const std::string& name, int train_per_class, int test_per_class) {
  const std::vector<std::string> filler = {"the",   "movie", "film",  "plot", "actor",
                                           "scene", "story", "was",   "and",  "it",
                                           "a",     "of",    "to",    "this", "ending"};
  const std::vector<std::string> positive = {"great", "wonderful", "superb", "loved"};
  const std::vector<std::string> negative = {"awful", "boring", "terrible", "hated"};
  std::mt19937 rng(7);  // test data only
  const std::string root = TestPath(name);
  MakeTestDirectory(root);
  for (const char* split : {"train", "test"}) {
    MakeTestDirectory(root + "/" + split);
    const int count = std::string(split) == "train" ? train_per_class : test_per_class;
    for (const char* label : {"pos", "neg"}) {
      MakeTestDirectory(root + "/" + split + "/" + label);
      const auto& words = std::string(label) == "pos" ? positive : negative;
      for (int i = 0; i < count; ++i) {
        std::string text;
        // 256 words, every third a signal word (a short review would be mostly padding
        // after the 256-token cut, and the average pooling would dilute its signal).
        for (int w = 0; w < 256; ++w) {
          text += (w % 3 == 2 ? words[rng() % words.size()] : filler[rng() % filler.size()]);
          text += w == 100 ? "<br /><br />" : " ";
        }
        WriteTestFile(name + "/" + split + "/" + label + "/" + std::to_string(i) + "_7.txt", text);
      }
    }
  }
  return root;
}

TEST(ImdbTrainerTest, LearnsAnEasySignalAndWritesAnAccountedLedger) {
  const TrainerInfo* trainer = FindTrainer("imdb");
  ASSERT_NE(trainer, nullptr);
  TrainOptions o;
  o.model = "imdb";
  o.data_dir = WriteToyImdb("imdb_toy", 100, 50);  // 200 train / 100 test reviews
  o.output_dir = TestPath("imdb_run");
  o.format = "json";
  o.batch_size = 50;  // q = 50/200
  o.epochs = 16;      // 64 steps of the paper's NoisyAdam: sigma 0.56, C 1, lr 0.02
  testing::internal::CaptureStdout();
  const absl::Status status = trainer->run(o);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 16u);
  // --format=json prints exactly the metrics lines.
  EXPECT_EQ(nlohmann::json::parse(out.substr(0, out.find('\n'))), metrics.front());
  // Learning: the mean training loss of the last epoch is well below that of the first
  // (ln 2 = 0.69 at chance), and the test reviews are classified. Six runs at these
  // settings ended (after 14 epochs) at losses 0.004-0.24 and test accuracy 100 %.
  const double first = metrics.front()["train_loss"].get<double>();
  const double last = metrics.back()["train_loss"].get<double>();
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
  EXPECT_GE(metrics.back()["test_accuracy"].get<double>(), 0.9);
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(), 0.25,
                        0.56, 1.0, 1e-5);
  for (const char* file : {"/model.pt", "/optimizer.pt", "/checkpoint.json"}) {
    EXPECT_TRUE(std::ifstream(o.output_dir + file).good()) << file;
  }
}

// --resume keeps the checkpoint's sigma, batch size (q) and clip norm without their flags,
// refuses flags that contradict them, and continues the one ledger.
TEST(ImdbTrainerTest, ResumeKeepsTheCheckpointsPrivacySettings) {
  TrainOptions o;
  o.model = "imdb";
  o.data_dir = WriteToyImdb("imdb_resume_toy", 20, 5);  // 40 train reviews
  o.output_dir = TestPath("imdb_resume");
  o.format = "json";
  o.batch_size = 10;  // q = 1/4, 4 steps per epoch
  o.clip_norm = 0.5;
  o.noise_multiplier = 0.8;
  o.epochs = 1;
  testing::internal::CaptureStdout();
  ASSERT_TRUE(FindTrainer("imdb")->run(o).ok());
  TrainOptions resume;
  resume.model = "imdb";
  resume.data_dir = o.data_dir;
  resume.output_dir = o.output_dir;
  resume.format = "json";
  resume.epochs = 2;
  resume.resume = true;
  TrainOptions bad = resume;
  bad.clip_norm = 1.0;
  const absl::Status refused = FindTrainer("imdb")->run(bad);
  EXPECT_NE(refused.message().find("--clip_norm=1 contradicts the checkpoint's clip_norm = 0.5"),
            std::string::npos)
      << refused;
  const absl::Status resumed = FindTrainer("imdb")->run(resume);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(resumed.ok()) << resumed;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 8);
  ExpectLedgerAccounted(ReadJsonLines(o.output_dir + "/ledger.jsonl"), metrics.back(), 0.25,
                        0.8, 0.5, 1e-5);
}

// `dpkit train imdb --model=transformer` with the given files.
TrainOptions TransformerRun(const std::string& data_dir, const std::string& output) {
  TrainOptions o;
  o.model = "imdb";
  o.extra_flags["model"] = "transformer";
  o.given_flags.insert("model");
  o.data_dir = data_dir;
  o.output_dir = TestPath(output);
  o.format = "json";
  o.threads = 1;  // the test machine's other jobs: one thread finishes sooner
  return o;
}

// The transformer encoder of plain torch::nn modules, made private by MakePrivate's module
// replacement and trained by the engine: it learns the signal, and the ledger holds exactly
// one Poisson-sampled Gaussian line per step, which the reported epsilon accounts.
TEST(ImdbTrainerTest, TransformerLearnsAnEasySignalWithOneLedgerLinePerStep) {
  TrainOptions o = TransformerRun(WriteToyImdb("imdb_transformer_toy", 100, 50),
                                  "imdb_transformer_run");
  o.batch_size = 50;       // q = 50/200: 4 steps per epoch
  o.epochs = 6;            // the defaults otherwise: sigma 1, C 1, DP-Adam
  o.learning_rate = 0.01;  // few steps: at 1e-3 24 steps barely move the loss
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("imdb")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 6u);
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 24);
  const std::vector<nlohmann::json> ledger = ReadJsonLines(o.output_dir + "/ledger.jsonl");
  EXPECT_EQ(ledger.size(), 24u);  // one line per step, nothing else
  ExpectLedgerAccounted(ledger, metrics.back(), 0.25, 1.0, 1.0, 1e-5);
  // Learning (chance: loss ln 2 = 0.69, accuracy 0.5). Two runs at these settings through
  // the dpkit train CLI, stopped after 5 epochs, were at train losses 0.019 and 0.067 (from
  // 0.66-0.67) and test accuracy 100 %.
  const double first = metrics.front()["train_loss"].get<double>();
  const double last = metrics.back()["train_loss"].get<double>();
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
  EXPECT_GE(metrics.back()["test_accuracy"].get<double>(), 0.9);
}

// Killed with SIGKILL after step 6's ledger line, before its update (the checkpoint is at
// step 4): --resume continues the one ledger from the checkpoint; a resume with the other
// model is refused, one line, nothing accounted.
TEST(ImdbTrainerTest, TransformerResumesAfterSigkill) {
  using training_testing::KillAt;
  using training_testing::RunInChild;
  TrainOptions fresh = TransformerRun(WriteToyImdb("imdb_transformer_kill_toy", 20, 5),
                                      "imdb_transformer_kill");
  fresh.batch_size = 10;  // q = 1/4: 4 steps per epoch
  fresh.epochs = 3;
  ASSERT_EQ(RunInChild(fresh, KillAt(FaultPoint::kLedgerAppended, 6)), -SIGKILL);
  ASSERT_EQ(ReadJsonLines(fresh.output_dir + "/ledger.jsonl").size(), 7u);
  TrainOptions resume = TransformerRun(fresh.data_dir, "imdb_transformer_kill");
  resume.epochs = 3;
  resume.resume = true;
  TrainOptions other = resume;
  other.extra_flags["model"] = "bow";
  const absl::Status refused = FindTrainer("imdb")->run(other);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("--resume needs the run's own --model (this one: --model=bow)"),
            std::string::npos)
      << refused;
  EXPECT_EQ(refused.message().find('\n'), std::string::npos) << refused;
  EXPECT_EQ(ReadJsonLines(fresh.output_dir + "/ledger.jsonl").size(), 7u);
  ASSERT_EQ(RunInChild(resume), 0);
  const std::vector<nlohmann::json> metrics = ReadJsonLines(fresh.output_dir + "/metrics.jsonl");
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 12);
  // Steps 0-3 checkpointed, 4-6 accounted and lost, then 4-11 again: over-counting is safe.
  const std::vector<nlohmann::json> ledger = ReadJsonLines(fresh.output_dir + "/ledger.jsonl");
  EXPECT_EQ(ledger.size(), 15u);
  for (const nlohmann::json& line : ledger) {
    EXPECT_DOUBLE_EQ(line.at("sampling_rate").get<double>(), 0.25);
  }
}

TEST(ImdbTrainerTest, UnknownModelIsAOneLineError) {
  TrainOptions o;
  o.model = "imdb";
  o.extra_flags["model"] = "lstm";
  o.data_dir = TestPath("no_such_aclImdb");
  const absl::Status status = FindTrainer("imdb")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--model must be bow or transformer"), std::string::npos);
}

// --help states both models' defaults from the one defaults function.
TEST(ImdbTrainerTest, DefaultsOfBothModels) {
  const TrainerInfo* trainer = FindTrainer("imdb");
  ASSERT_NE(trainer->defaults, nullptr);
  TrainOptions o;
  o.extra_flags["model"] = "bow";
  EXPECT_EQ(trainer->defaults(o, 0).batch_size, 512);
  ASSERT_EQ(trainer->default_variants.size(), 1u);
  o.extra_flags[trainer->default_variants[0].first] = trainer->default_variants[0].second;
  const TaskDefaults d = trainer->defaults(o, 0);
  EXPECT_EQ(d.batch_size, 256);
  EXPECT_EQ(d.noise_multiplier, 1.0);
  EXPECT_EQ(d.epochs, 3);
  EXPECT_EQ(d.optimizer, "adam");
}

TEST(ImdbTrainerTest, MissingDataDirIsAOneLineNotFound) {
  TrainOptions o;
  o.model = "imdb";
  o.data_dir = TestPath("no_such_aclImdb");
  const absl::Status status = FindTrainer("imdb")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("no_such_aclImdb"), std::string::npos) << status;
  EXPECT_NE(status.message().find("--data_dir"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
}

TEST(ImdbTrainerTest, FolderWithoutTestReviewsIsAOneLineError) {
  const std::string root = WriteToyImdb("imdb_no_test", 3, 0);
  TrainOptions o;
  o.model = "imdb";
  o.data_dir = root;
  const absl::Status status = FindTrainer("imdb")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("test"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
}

}  // namespace
}  // namespace dpkit::models::wide
