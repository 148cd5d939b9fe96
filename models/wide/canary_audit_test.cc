// The memorization audit detects memorization (Zhang, Mironov & Hejazinia 2021, Table 2;
// Carlini et al. 2019): `dpkit train word2vec` on a corpus with inserted canaries, once
// without privacy and once strongly private, and summary.json's audit read back. The
// non-private model ranks its canaries far above the out-of-training baseline (phrases
// drawn like the canaries but never inserted); the private one does not.
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/wide/wide_testing.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {
namespace {

// 40,000 tokens over 1,200 distinct letter-only words (the trainer's vocabulary is the
// 1,000 most frequent), in tagged-Brown format; the text carries no structure.
std::string WriteCorpus() {
  const std::string dir = wide::TestPath("canary_corpus");
  wide::MakeTestDirectory(dir);
  std::ofstream out(dir + "/ca01");
  std::mt19937_64 engine(11);
  std::uniform_int_distribution<int> word(0, 1199);
  for (int i = 0; i < 40000; ++i) {
    const int w = i < 1200 ? i : word(engine);
    std::string text = "w";
    for (int k = w; k > 0 || text.size() == 1; k /= 26) {
      text.push_back(static_cast<char>('a' + k % 26));
    }
    out << text << "/nn" << ((i % 20 == 19) ? " ./.\n\n" : " ");
  }
  return dir;
}

nlohmann::json Audit(const std::string& algorithm, double learning_rate,
                     double noise_multiplier) {
  TrainOptions o;
  o.model = "word2vec";
  o.data_dir = WriteCorpus();
  o.output_dir = wide::TestPath("canary_audit_" + algorithm);
  o.overwrite = true;
  o.batch_size = 64;
  o.epochs = 4;
  o.learning_rate = learning_rate;
  o.clip_norm = 1;
  o.seed = 3;
  if (algorithm != "sgd") {
    o.noise_multiplier = noise_multiplier;
    o.given_flags = {"noise_multiplier"};
  }
  // Every extra flag as `dpkit train` passes them (the selection flags are unused here).
  o.extra_flags = {{"algorithm", algorithm},      {"embedding_dim", "16"},
                   {"negatives", "8"},            {"selected_rows", "50"},
                   {"selection_epsilon", "1"},    {"selection_threshold", "1"},
                   {"selection_clip_norm", "1"},  {"second_clip_norm", "1"},
                   {"canaries", "50"},            {"canary_repeats", "20"},
                   {"reference_phrases", "2000"}, {"oov", "drop"}};
  const absl::Status run = FindTrainer("word2vec")->run(o);
  EXPECT_TRUE(run.ok()) << run;
  std::ifstream in(o.output_dir + "/summary.json");
  return nlohmann::json::parse(in).at("audit");
}

TEST(CanaryAuditTest, NonPrivateModelMemorizesAndStronglyPrivateOneDoesNot) {
  const nlohmann::json plain = Audit("sgd", 2, 0);
  // Memorized: the canaries' ranks differ from the out-of-training baseline's (p far below
  // any false-alarm level) and their mean exposure exceeds the baseline's by > 3 bits.
  EXPECT_LT(plain.at("baseline_p_value").get<double>(), 1e-6) << plain;
  EXPECT_GT(plain.at("mean_exposure").get<double>(),
            plain.at("baseline_mean_exposure").get<double>() + 3)
      << plain;
  EXPECT_LT(plain.at("p_value").get<double>(), 1e-6) << plain;
  // sigma 50: the model is almost noise, canaries and held-out phrases are exchangeable,
  // so baseline_p_value is ~uniform: a false failure has probability 1e-4.
  const nlohmann::json dp = Audit("dp-sgd", 0.05, 50);
  EXPECT_GT(dp.at("baseline_p_value").get<double>(), 1e-4) << dp;
  EXPECT_LT(dp.at("mean_exposure").get<double>(),
            dp.at("baseline_mean_exposure").get<double>() + 1.5)
      << dp;
}

}  // namespace
}  // namespace dpkit::models
