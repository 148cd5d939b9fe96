// `dpkit train imdb`: IMDb sentiment (aclImdb, 25,000 training reviews), two models
// (--model):
//
// bow (the default): Bu et al. 2020, Sec. 4 — the 10,000 most frequent training words,
// reviews cut / padded to 256 tokens, Embedding 16 -> global average pooling -> Dense 16
// ReLU -> Dense 2 (softmax cross-entropy), trained by NoisyAdam with sigma 0.56, Poisson
// rate 512/25,000, learning rate 0.02, clip norm 1, 9 epochs, delta 1e-5 (the settings of
// their tensorflow_privacy `imdb_tutorial.py`, whose loop of 25 epochs stops once mu_CLT > 2,
// i.e. after epoch 9, mu = 2.07 as in their Sec. 5). The paper reports 83.8 % test accuracy.
// Per-example clipping uses the layers of optim/torch/per_example_layers.h: the
// embedding's per-example gradient norms are ghost norms over the review's token rows
// (Li et al. 2021, Sec. 4.2), so the (10,002 x 16) per-example gradient is never built.
//
// transformer: a transformer encoder classifier written with plain torch::nn modules
// (models/wide/text_transformer.h: d 64, 4 heads, 2 blocks, feed-forward 128, the last 128
// tokens of each review) and made private by MakePrivate's module replacement
// (optim::ConvertToPerExample), trained by DP-Adam (Li et al. 2021 fine-tune transformers
// with DP-Adam) at sigma 1, B 256, C 1, learning rate 1e-3, 3 epochs.
//
// The loop, ledger, metrics and checkpoints are the training engine's (models/engine/).
//
// Data: --data_dir is the unpacked `aclImdb` folder (train/{pos,neg}, test/{pos,neg}).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/models/dp_step_options.h"
#include "dpkit/models/engine/torch_task.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/wide/imdb.h"
#include "dpkit/models/wide/text_transformer.h"
#include "dpkit/optim/torch/make_private.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "bow",
          "imdb: bow (Bu et al. 2020: embedding 16, average pooling, dense 16) or transformer "
          "(a 2-block transformer encoder of plain torch::nn modules made private by MakePrivate)");

namespace dpkit::models::wide {
namespace {

namespace F = torch::nn::functional;

constexpr int kVocabulary = 10000;
constexpr int kLength = 256;
constexpr int64_t kEmbeddingDim = 16;
constexpr int64_t kHidden = 16;
// The transformer reads the last 128 tokens of each review (imdb.h keeps the last ones).
constexpr int kTransformerLength = 128;
// Test reviews per forward pass in the evaluation (bounds the attention scores' memory).
constexpr int64_t kEvaluationChunk = 256;

// Embedding 16 -> mean over the sequence (padding included, as Keras'
// GlobalAveragePooling1D without a mask) -> Dense 16 ReLU -> Dense 2.
class ImdbNetImpl : public torch::nn::Module {
 public:
  explicit ImdbNetImpl(int64_t num_ids)
      : embedding_(register_module("embedding", optim::DpEmbedding(num_ids, kEmbeddingDim))),
        hidden_(register_module("hidden", optim::DpLinear(kEmbeddingDim, kHidden))),
        output_(register_module("output", optim::DpLinear(kHidden, 2))) {
    // Keras' default embedding initialiser, U(-0.05, 0.05), as in the paper's code.
    torch::NoGradGuard no_grad;
    embedding_->weight.uniform_(-0.05, 0.05);
  }
  // tokens: int64 (B, length) -> logits (B, 2).
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor x = embedding_->forward(tokens).mean(1);
    return output_->forward(torch::relu(hidden_->forward(x)));
  }

 private:
  optim::DpEmbedding embedding_;
  optim::DpLinear hidden_, output_;
};
TORCH_MODULE(ImdbNet);

struct Split {
  torch::Tensor tokens;  // int64 (N, length)
  torch::Tensor labels;  // int64 (N)
};

Split ToTensors(const ImdbSplit& split, int length, std::optional<int64_t> subset) {
  const int64_t n = subset ? std::min(*subset, split.size()) : split.size();
  Split out;
  out.tokens = torch::from_blob(const_cast<int32_t*>(split.tokens.data()), {split.size(), length},
                                torch::kInt32)
                   .narrow(0, 0, n)
                   .to(torch::kLong);
  out.labels = torch::from_blob(const_cast<int*>(split.labels.data()), {split.size()},
                                torch::kInt32)
                   .narrow(0, 0, n)
                   .to(torch::kLong);
  return out;
}

bool IsTransformer(const TrainOptions& options) {
  const auto model = options.extra_flags.find("model");
  return model != options.extra_flags.end() && model->second == "transformer";
}

// Bu et al. 2020, Sec. 4 (IMDb); --model=transformer: DP-Adam at sigma 1 (see the file
// comment), in physical slices of 128 reviews (the attention scores are B x 4 x 128^2).
TaskDefaults ImdbDefaults(const TrainOptions& options, int64_t /*train_size*/) {
  TaskDefaults d;
  d.optimizer = "adam";
  d.delta = 1e-5;
  d.clip_norm = 1.0;
  if (IsTransformer(options)) {
    d.learning_rate = 1e-3;
    d.noise_multiplier = 1.0;
    d.batch_size = 256;
    d.epochs = 3;
    d.physical_batch_size = 128;
    return d;
  }
  d.learning_rate = 0.02;
  d.noise_multiplier = 0.56;
  d.batch_size = 512;
  d.epochs = 9;  // their loop stops when mu_CLT > 2: after epoch 9
  return d;
}

// The network of --model, private: its forward and the module the engine trains.
struct Network {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

absl::StatusOr<Network> MakeNetwork(bool transformer, int64_t num_ids, int length) {
  if (!transformer) {
    ImdbNet net(num_ids);
    return Network{net.ptr(), [net](const torch::Tensor& x) mutable { return net->forward(x); }};
  }
  TextTransformerOptions options;
  options.vocabulary = num_ids;
  options.length = length;
  TextTransformer net(options);
  // MakePrivate's module replacement: Embedding, Linear and LayerNorm become per-example
  // layers sharing their parameters (optim/torch/make_private.h).
  absl::Status converted = optim::ConvertToPerExample(*net);
  if (!converted.ok()) return converted;
  return Network{net.ptr(), [net](const torch::Tensor& x) mutable { return net->forward(x); }};
}

absl::Status TrainImdb(const TrainOptions& o) {
  const auto model_flag = o.extra_flags.find("model");
  const std::string model = model_flag == o.extra_flags.end() ? "bow" : model_flag->second;
  if (model != "bow" && model != "transformer") {
    return absl::InvalidArgumentError(
        absl::StrCat("--model must be bow or transformer, got '", model, "'"));
  }
  const bool transformer = model == "transformer";
  TorchTask task;
  // LibTorch's threads, the BLAS's and the allocator, before any tensor operation.
  task.threads = ConfigureTorchThreads(o);
  const std::string dir = o.data_dir.empty() ? "data/aclImdb" : o.data_dir;
  absl::StatusOr<ImdbData> data =
      ReadImdb(dir, kVocabulary, transformer ? kTransformerLength : kLength);
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat(data.status().message(),
                                     " (set --data_dir to the unpacked aclImdb folder)"));
  }
  const Split train = ToTensors(data->train, data->length, o.train_subset);
  const Split test = ToTensors(data->test, data->length, o.test_subset);
  torch::manual_seed(o.seed);  // initialisation only
  // ids 0 (pad), 1 (OOV), 2 + rank
  absl::StatusOr<Network> net = MakeNetwork(transformer, data->vocabulary_size + 2, data->length);
  if (!net.ok()) return net.status();
  auto forward = net->forward;

  task.model_name = transformer ? "imdb --model=transformer" : o.model;
  task.model = net->module.get();
  task.train_size = train.labels.size(0);
  task.losses = [&](const torch::Tensor& index, const torch::Device& device) {
    torch::Tensor logits = forward(train.tokens.index_select(0, index).to(device));
    return ClassificationLosses(logits, train.labels.index_select(0, index).to(device));
  };
  task.evaluate = [&](const torch::Device& device) {
    int64_t correct = 0;
    const int64_t n = test.labels.size(0);
    for (int64_t first = 0; first < n; first += kEvaluationChunk) {
      const int64_t len = std::min<int64_t>(kEvaluationChunk, n - first);
      torch::Tensor logits = forward(test.tokens.narrow(0, first, len).to(device));
      correct += logits.argmax(1).cpu().eq(test.labels.narrow(0, first, len)).sum().item<int64_t>();
    }
    return TestAccuracyJson(correct, n);
  };
  task.describe = DescribeTestAccuracy;
  task.defaults = ImdbDefaults(o, task.train_size);
  absl::Status status = RunTorchTraining(o, std::move(task));
  if (o.resume && absl::StrContains(status.message(), "model.pt cannot be read")) {
    // The likeliest cause: the run was trained with the other --model.
    return absl::Status(status.code(), absl::StrCat(status.message(),
                                                    "; --resume needs the run's own --model "
                                                    "(this one: --model=",
                                                    model, ")"));
  }
  return status;
}

std::vector<std::string> ImdbFlags() {
  std::vector<std::string> flags = DpStepFlagNames();
  flags.push_back("model");
  return flags;
}

}  // namespace
}  // namespace dpkit::models::wide

DPKIT_REGISTER_TRAINER((dpkit::models::TrainerInfo{
    "imdb",
    "IMDb sentiment (aclImdb in --data_dir): embedding 16 + average pooling + dense 16, "
    "NoisyAdam (Bu et al. 2020), or --model=transformer",
    dpkit::models::wide::ImdbFlags(), &dpkit::models::wide::TrainImdb,
    &dpkit::models::wide::ImdbDefaults, {{"model", "transformer"}}}));
