#include <fstream>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "models/trainer_registry.h"
#include "models/wide/wide_testing.h"

namespace dpkit::models {
namespace {

// A tagged-Brown-format corpus of 1,200 distinct letter-only words (the trainer needs a
// 1,000-word vocabulary), 40,000 tokens in one file.
std::string WriteSyntheticCorpus() {
  const std::string dir = wide::TestPath("synthetic_brown");
  wide::MakeTestDirectory(dir);
  std::mt19937_64 engine(5);
  std::uniform_int_distribution<int> word(0, 1199);
  std::ofstream out(dir + "/ca01");
  for (int i = 0; i < 40000; ++i) {
    const int w = i < 1200 ? i : word(engine);
    std::string text = "w";
    for (int k = w; k > 0 || text.size() == 1; k /= 26) text.push_back(static_cast<char>('a' + k % 26));
    out << text << "/nn" << ((i % 20 == 19) ? " ./.\n\n" : " ");
  }
  return dir;
}

TrainOptions SmallRun(const std::string& algorithm, const std::string& output_dir) {
  TrainOptions o;
  o.model = "word2vec";
  o.data_dir = WriteSyntheticCorpus();
  o.batch_size = 64;
  o.max_steps = 4;
  o.epochs = 1;
  o.output_dir = output_dir;
  o.extra_flags = {{"algorithm", algorithm},        {"embedding_dim", "8"},
                   {"negatives", "8"},              {"selected_rows", "50"},
                   {"selection_epsilon", "1"},      {"selection_threshold", "1"},
                   {"selection_clip_norm", "10"},   {"second_clip_norm", "1"},
                   {"canaries", "5"},               {"canary_repeats", "2"},
                   {"reference_phrases", "100"}};
  return o;
}

TEST(Word2VecTrainerTest, EveryAlgorithmRunsAndWritesCurvesAndSummary) {
  const TrainerInfo* trainer = FindTrainer("word2vec");
  ASSERT_NE(trainer, nullptr);
  for (std::string algorithm : {"sgd", "dp-sgd", "dp-sparse-em", "dp-sparse-svt"}) {
    const std::string out = wide::TestPath("w2v_" + algorithm);
    ASSERT_TRUE(trainer->run(SmallRun(algorithm, out)).ok()) << algorithm;
    for (std::string file : {"/loss.csv", "/loss.svg", "/summary.json"}) {
      EXPECT_TRUE(std::ifstream(out + file).good()) << algorithm << file;
    }
    EXPECT_EQ(std::ifstream(out + "/ledger.jsonl").good(), algorithm != "sgd") << algorithm;
  }
}

TEST(Word2VecTrainerTest, RejectsUnknownAlgorithm) {
  EXPECT_EQ(FindTrainer("word2vec")->run(SmallRun("adam", "")).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dpkit::models
