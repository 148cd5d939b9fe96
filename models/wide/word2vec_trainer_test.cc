#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>
#include <vector>
#include <random>
#include <string>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"
#include "dpkit/models/engine/checkpoint.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/wide/brown_corpus.h"
#include "dpkit/models/wide/trainer_testing.h"
#include "dpkit/models/wide/wide_testing.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/training/training_testing.h"

namespace dpkit::models {
namespace {

// The 40,000 tokens of a synthetic corpus of 1,200 distinct letter-only words (the trainer
// needs a 1,000-word vocabulary); a few of them ("we", "who", "was", "why") are stop words.
std::vector<std::string> SyntheticWords() {
  std::mt19937_64 engine(5);
  std::uniform_int_distribution<int> word(0, 1199);
  std::vector<std::string> words;
  for (int i = 0; i < 40000; ++i) {
    const int w = i < 1200 ? i : word(engine);
    std::string text = "w";
    for (int k = w; k > 0 || text.size() == 1; k /= 26) text.push_back(static_cast<char>('a' + k % 26));
    words.push_back(text);
  }
  return words;
}

// SyntheticWords() in tagged-Brown format, in one file.
std::string WriteSyntheticCorpus() {
  const std::string dir = wide::TestPath("synthetic_brown");
  wide::MakeTestDirectory(dir);
  std::ofstream out(dir + "/ca01");
  const std::vector<std::string> words = SyntheticWords();
  for (size_t i = 0; i < words.size(); ++i) {
    out << words[i] << "/nn" << ((i % 20 == 19) ? " ./.\n\n" : " ");
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
                   {"reference_phrases", "100"},    {"oov", "unk"}};
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

// summary.json's ledger_epsilon is the ledger file re-accounted by //accounting:rdp (as
// `dpkit ledger` does): equal to the RDP epsilon of the event the sparse algorithm's steps
// are, built here by hand from the run's parameters (selected_rows 50 picks of an
// exponential mechanism with epsilon 1/50 each, which are 1/50-bounded-range, composed with
// the Gaussian of z = 1, Poisson-sampled at the run's q, `steps` times). Relative
// tolerance 1e-9: both sides are the same certified RDP computation of the same event, so
// only a ledger that records, merges or reads the steps wrongly can make them differ.
TEST(Word2VecTrainerTest, SparseLedgerEpsilonIsTheRdpOfTheRecordedSteps) {
  const std::string out = wide::TestPath("w2v_sparse_ledger");
  ASSERT_TRUE(FindTrainer("word2vec")->run(SmallRun("dp-sparse-em", out)).ok());
  std::ifstream in(out + "/summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in);
  const int64_t steps = summary.at("steps").get<int64_t>();
  const double q = summary.at("sampling_rate").get<double>();
  ASSERT_EQ(steps, 4);
  EXPECT_EQ(wide::ReadJsonLines(out + "/ledger.jsonl").size(), 4u);
  ASSERT_FALSE(summary.at("ledger_epsilon").contains("error")) << summary["ledger_epsilon"];

  auto pick = accounting::Event::BoundedRange(1.0 / 50);
  ASSERT_TRUE(pick.ok());
  auto selection = accounting::Event::SelfComposed(*pick, 50);
  auto gaussian = accounting::Event::Gaussian(1.0);
  ASSERT_TRUE(selection.ok() && gaussian.ok());
  auto composed = accounting::Event::Composed({*selection, *gaussian});
  ASSERT_TRUE(composed.ok());
  auto sampled = accounting::Event::PoissonSampled(q, *composed);
  ASSERT_TRUE(sampled.ok());
  auto run = accounting::Event::SelfComposed(*sampled, steps);
  ASSERT_TRUE(run.ok());
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  auto rdp = accounting::ComputeRdp(*run, orders);
  ASSERT_TRUE(rdp.ok());
  auto eps = accounting::RdpToEpsilonOptimal(orders, *rdp, 1e-5);
  ASSERT_TRUE(eps.ok());
  const double reported = summary["ledger_epsilon"].at("rdp").at("epsilon").get<double>();
  EXPECT_NEAR(reported, eps->epsilon, 1e-9 * eps->epsilon);
  // The optimizer's own RDP figure (optim/sparse:sparse_privacy, from the parameters, not
  // the file) is of the same event, and strong composition is looser.
  EXPECT_NEAR(summary.at("epsilon").at("rdp").get<double>(), eps->epsilon, 1e-9 * eps->epsilon);
  EXPECT_LT(reported, summary["epsilon"].at("strong_composition").get<double>());
}

// --resume of the dense and the sparse private algorithms: the checkpoint's algorithm,
// noise multiplier and selection settings are restored without their flags, a flag that
// contradicts them is refused, and after a kill -9 between a step's ledger append and its
// update the resumed run accounts every applied step once, plus the lost one(s).
TEST(Word2VecTrainerTest, DenseAndSparseResumeKeepTheirPrivacySettingsAndNeverUnderCount) {
  for (const std::string algorithm : {"dp-sgd", "dp-sparse-em"}) {
    const std::string out = wide::TestPath("w2v_resume_" + algorithm);
    TrainOptions fresh = SmallRun(algorithm, out);
    fresh.given_flags = {"algorithm", "selection_epsilon", "noise_multiplier"};
    fresh.extra_flags["selection_epsilon"] = "2";
    fresh.noise_multiplier = 1.5;
    fresh.train_subset = 118;  // + 10 canary samples: n = 128, 4 steps per epoch
    fresh.batch_size = 32;
    fresh.epochs = 3;
    fresh.max_steps.reset();
    // Killed after step 6's ledger entry, before its update; the checkpoint is at step 4.
    ASSERT_EQ(training_testing::RunInChild(
                  fresh, training_testing::KillAt(FaultPoint::kLedgerAppended, 6)),
              -SIGKILL)
        << algorithm;
    ASSERT_EQ(wide::ReadJsonLines(out + "/ledger.jsonl").size(), 7u) << algorithm;
    TrainOptions resume = SmallRun("dp-sparse-em", out);  // the flags' defaults
    resume.batch_size.reset();  // the checkpoint's
    resume.train_subset = 118;
    resume.max_steps.reset();
    resume.epochs = 3;
    resume.resume = true;
    TrainOptions bad = resume;
    bad.noise_multiplier = 1.0;
    const absl::Status contradicted = FindTrainer("word2vec")->run(bad);
    EXPECT_NE(contradicted.message().find("--noise_multiplier=1 contradicts the checkpoint's "
                                          "noise_multiplier = 1.5"),
              std::string::npos)
        << contradicted;
    bad = resume;
    bad.extra_flags["algorithm"] = algorithm == "dp-sgd" ? "dp-sparse-em" : "dp-sgd";
    bad.given_flags.insert("algorithm");
    EXPECT_NE(FindTrainer("word2vec")->run(bad).message().find("contradicts the checkpoint's "
                                                               "algorithm = " + algorithm),
              std::string::npos);
    testing::internal::CaptureStdout();
    const absl::Status resumed = FindTrainer("word2vec")->run(resume);
    testing::internal::GetCapturedStdout();
    ASSERT_TRUE(resumed.ok()) << resumed;
    std::ifstream in(out + "/summary.json");
    const nlohmann::json summary = nlohmann::json::parse(in);
    EXPECT_EQ(summary.at("algorithm"), algorithm);
    EXPECT_EQ(summary.at("steps"), 12);
    const std::vector<nlohmann::json> ledger = wide::ReadJsonLines(out + "/ledger.jsonl");
    // Steps 0-3 (checkpointed), 4-6 accounted but lost, 4-11 again: 12 + 3.
    ASSERT_EQ(ledger.size(), 15u) << algorithm;
    nlohmann::json first = ledger[0];
    first.erase("step");
    for (nlohmann::json line : ledger) {
      line.erase("step");  // the sparse steps' events carry no step number
      EXPECT_EQ(line, first) << algorithm;
    }
    if (algorithm == "dp-sgd") {
      EXPECT_DOUBLE_EQ(ledger[0]["queries"][0].at("noise_stddev").get<double>(), 1.5);
    } else {
      EXPECT_NE(ledger[0].dump().find("0.04"), std::string::npos) << ledger[0];  // 2 / 50
    }
  }
}

TEST(Word2VecTrainerTest, RejectsUnknownAlgorithm) {
  EXPECT_EQ(FindTrainer("word2vec")->run(SmallRun("adam", "")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Word2VecTrainerTest, DivergenceIsAOneLineErrorNotNaNOutput) {
  TrainOptions o = SmallRun("sgd", wide::TestPath("w2v_diverged"));
  o.learning_rate = 1e30;
  o.extra_flags["canaries"] = "0";
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("word2vec")->run(o);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--learning_rate"), std::string::npos) << status;
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status;
  EXPECT_EQ(out.find("null"), std::string::npos) << out;
  EXPECT_EQ(out.find("nan"), std::string::npos) << out;
  EXPECT_FALSE(std::ifstream(o.output_dir + "/summary.json").good());
}

TEST(Word2VecTrainerTest, RejectsUnknownOovPolicyInOneLine) {
  TrainOptions o = SmallRun("sgd", "");
  o.extra_flags["oov"] = "keep";
  const absl::Status status = FindTrainer("word2vec")->run(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--oov must be unk or drop"), std::string::npos) << status;
}

// Sample counts of --oov=unk and --oov=drop against a direct count over the synthetic
// tokens: one document, window 2, so a stream of m ids gives m - 4 samples; with unk the
// stream is every non-stop token, with drop only the tokens of the 1,000 most frequent
// non-stop words (ties alphabetical).
TEST(Word2VecTrainerTest, OovUnkKeepsEveryNonStopTokenAndDropOnlyVocabularyWords) {
  std::map<std::string, int64_t> counts;
  int64_t non_stop = 0;
  for (const std::string& w : SyntheticWords()) {
    if (wide::EnglishStopWords().contains(w)) continue;
    ++non_stop;
    ++counts[w];
  }
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [w, c] : counts) ranked.push_back({-c, w});
  std::sort(ranked.begin(), ranked.end());
  int64_t in_vocabulary = 0;
  for (size_t i = 0; i < 1000; ++i) in_vocabulary += -ranked[i].first;
  ASSERT_LT(non_stop, 40000);  // the corpus does hold stop words

  TrainOptions o = SmallRun("sgd", wide::TestPath("w2v_unk"));
  o.extra_flags["canaries"] = "0";
  ASSERT_TRUE(FindTrainer("word2vec")->run(o).ok());
  std::ifstream unk_in(o.output_dir + "/summary.json");
  const nlohmann::json unk = nlohmann::json::parse(unk_in);
  EXPECT_EQ(unk.at("oov").get<std::string>(), "unk");
  const int64_t unk_samples = non_stop - 4;
  EXPECT_EQ(unk.at("corpus_samples").get<int64_t>(), unk_samples);
  // 2:1:2 split (fewer than 500,000 samples).
  EXPECT_EQ(unk.at("train_samples").get<int64_t>(), unk_samples * 2 / 5);
  EXPECT_EQ(unk.at("valid_samples").get<int64_t>(), unk_samples / 5);
  EXPECT_EQ(unk.at("test_samples").get<int64_t>(), unk_samples - unk_samples * 2 / 5 - unk_samples / 5);

  o.output_dir = wide::TestPath("w2v_drop");
  o.extra_flags["oov"] = "drop";
  ASSERT_TRUE(FindTrainer("word2vec")->run(o).ok());
  std::ifstream drop_in(o.output_dir + "/summary.json");
  const nlohmann::json drop = nlohmann::json::parse(drop_in);
  EXPECT_EQ(drop.at("corpus_samples").get<int64_t>(), in_vocabulary - 4);
  EXPECT_LT(in_vocabulary, non_stop);
}

}  // namespace
}  // namespace dpkit::models
