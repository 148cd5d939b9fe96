#include "dpkit/optim/torch/make_private.h"

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/str_cat.h"
#include "dpkit/accounting/calibrate.h"
#include "dpkit/base/status.h"

namespace dpkit::optim {
namespace {

// A per-example layer whose parameters are adopted from the module it replaces: the same
// tensors (TensorImpls) under the same names. (Module::parameters_ is protected, hence the
// subclass.)
template <typename Layer>
class Shared : public Layer {
 public:
  template <typename... Args>
  explicit Shared(Args&&... args) : Layer(std::forward<Args>(args)...) {}
  void Adopt(const std::string& name, torch::Tensor* member, const torch::Tensor& tensor) {
    TORCH_CHECK(tensor.sizes() == member->sizes(), "MakePrivate: shape mismatch for ", name);
    this->parameters_[name] = tensor;
    *member = tensor;
  }
};

// A supported module's replacement (typed, for a Sequential's AnyModule) or an error.
struct Replacement {
  std::shared_ptr<torch::nn::Module> module;
  torch::nn::AnyModule any;
};

// Builds `Layer` without consuming the default CPU generator (its constructor initialises
// parameters that are replaced at once), so the user's seeded random stream is unchanged.
template <typename Layer, typename... Args>
std::shared_ptr<Shared<Layer>> MakeShared(Args&&... args) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  torch::Tensor state = generator.get_state();
  auto layer = std::make_shared<Shared<Layer>>(std::forward<Args>(args)...);
  generator.set_state(state);
  return layer;
}

template <typename Layer>
Replacement Wrap(std::shared_ptr<Shared<Layer>> layer) {
  return {layer, torch::nn::AnyModule(layer)};
}

absl::Status Refuse(const std::string& path, const torch::nn::Module& module,
                    const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("MakePrivate: module '", path, "' (", module.name(), ") ", why));
}

// Every torch::nn::Linear configuration (bias or not).
absl::StatusOr<Replacement> ReplaceLinear(torch::nn::LinearImpl& m) {
  const auto& o = m.options;
  auto layer = MakeShared<DpLinearImpl>(o.in_features(), o.out_features(), o.bias());
  layer->Adopt("weight", &layer->weight, m.weight);
  if (o.bias()) layer->Adopt("bias", &layer->bias, m.bias);
  return Wrap(layer);
}

absl::StatusOr<Replacement> ReplaceConv2d(const std::string& path, torch::nn::Conv2dImpl& m) {
  const auto& o = m.options;
  if (o.groups() != 1 || o.transposed() ||
      !c10::holds_alternative<torch::enumtype::kZeros>(o.padding_mode())) {
    return Refuse(path, m,
                  "uses groups, a transposed kernel or non-zero padding, which DpConv2d does "
                  "not support: use groups(1) and zero padding");
  }
  DpConv2dOptions options;
  options.bias = o.bias();
  options.in_channels = o.in_channels();
  options.out_channels = o.out_channels();
  for (int d = 0; d < 2; ++d) {
    options.kernel_size[d] = (*o.kernel_size())[d];
    options.stride[d] = (*o.stride())[d];
    options.dilation[d] = (*o.dilation())[d];
  }
  if (const auto* padding = c10::get_if<torch::ExpandingArray<2>>(&o.padding())) {
    for (int d = 0; d < 2; ++d) options.padding[d] = (**padding)[d];
  } else if (!c10::holds_alternative<torch::enumtype::kValid>(o.padding())) {
    return Refuse(path, m, "uses padding \"same\": give the padding as numbers");
  }
  auto layer = MakeShared<DpConv2dImpl>(options);
  layer->Adopt("weight", &layer->weight, m.weight);
  if (o.bias()) layer->Adopt("bias", &layer->bias, m.bias);
  return Wrap(layer);
}

// Every torch::nn::Conv1d configuration: DpConv1d takes its options (dp_conv1d.h).
absl::StatusOr<Replacement> ReplaceConv1d(torch::nn::Conv1dImpl& m) {
  const auto& o = m.options;
  torch::nn::Conv1dOptions options(o.in_channels(), o.out_channels(), o.kernel_size());
  options.stride(o.stride())
      .padding(o.padding())
      .dilation(o.dilation())
      .groups(o.groups())
      .bias(o.bias())
      .padding_mode(o.padding_mode());
  auto layer = MakeShared<DpConv1dImpl>(options);
  layer->Adopt("weight", &layer->weight, m.weight);
  if (o.bias()) layer->Adopt("bias", &layer->bias, m.bias);
  return Wrap(layer);
}

absl::StatusOr<Replacement> ReplaceEmbedding(const std::string& path,
                                             torch::nn::EmbeddingImpl& m) {
  const auto& o = m.options;
  if (o.padding_idx().has_value() || o.max_norm().has_value() || o.scale_grad_by_freq() ||
      o.sparse()) {
    return Refuse(path, m,
                  "uses padding_idx, max_norm, scale_grad_by_freq or sparse, which DpEmbedding "
                  "does not support: drop them (mask padded positions in the loss instead)");
  }
  auto layer = MakeShared<DpEmbeddingImpl>(o.num_embeddings(), o.embedding_dim());
  layer->Adopt("weight", &layer->weight, m.weight);
  return Wrap(layer);
}

absl::StatusOr<Replacement> ReplaceLayerNorm(torch::nn::LayerNormImpl& m) {
  const auto& o = m.options;
  auto layer = MakeShared<DpLayerNormImpl>(o.normalized_shape(), o.eps());
  layer->Adopt("weight", &layer->weight, m.weight);
  layer->Adopt("bias", &layer->bias, m.bias);
  return Wrap(layer);
}

absl::StatusOr<Replacement> ReplaceGroupNorm(torch::nn::GroupNormImpl& m) {
  const auto& o = m.options;
  auto layer = MakeShared<DpGroupNormImpl>(o.num_groups(), o.num_channels(), o.eps());
  layer->Adopt("weight", &layer->weight, m.weight);
  layer->Adopt("bias", &layer->bias, m.bias);
  return Wrap(layer);
}

// torch::nn::LSTM, GRU and RNN: DpLSTM / DpGRU / DpRNN of the same options adopting every
// weight_ih_l{k}, weight_hh_l{k}, bias_*, weight_hr_l{k} and *_reverse (dp_rnn.h: the same
// ops, so the same outputs).
template <typename Layer, typename TorchImpl>
absl::StatusOr<Replacement> ReplaceRecurrent(TorchImpl& m) {
  const auto& o = m.options;
  DpRnnOptions options(o.input_size(), o.hidden_size());
  options.num_layers = o.num_layers();
  options.bias = o.bias();
  options.batch_first = o.batch_first();
  options.dropout = o.dropout();
  options.bidirectional = o.bidirectional();
  std::shared_ptr<Shared<Layer>> layer;
  if constexpr (std::is_same_v<TorchImpl, torch::nn::LSTMImpl>) options.proj_size = o.proj_size();
  if constexpr (std::is_same_v<TorchImpl, torch::nn::RNNImpl>) {
    layer = MakeShared<Layer>(
        options, c10::holds_alternative<torch::enumtype::kReLU>(o.nonlinearity()));
  } else {
    layer = MakeShared<Layer>(options);
  }
  auto own = m.named_parameters(/*recurse=*/false);
  for (auto [name, member] : layer->NamedParameterSlots()) layer->Adopt(name, member, own[name]);
  return Wrap(layer);
}

// torch::nn::MultiheadAttention: DpTorchMultiheadAttention of the same options adopting its
// own parameters and, in a DpTimeMajorLinear of its own, out_proj's (dp_attention.h: the
// same ops, so the same outputs and attention weights).
absl::StatusOr<Replacement> ReplaceMultiheadAttention(torch::nn::MultiheadAttentionImpl& m) {
  auto layer = MakeShared<DpTorchMultiheadAttentionImpl>(m.options);
  auto own = m.named_parameters(/*recurse=*/false);
  for (auto [name, member] : layer->NamedParameterSlots()) layer->Adopt(name, member, own[name]);
  const int64_t e = m.options.embed_dim();
  auto out = MakeShared<DpTimeMajorLinearImpl>(e, e, m.options.bias());
  out->Adopt("weight", &out->weight, m.out_proj->weight);
  if (m.options.bias()) out->Adopt("bias", &out->bias, m.out_proj->bias);
  layer->out_proj = layer->replace_module(
      "out_proj", DpTimeMajorLinear(std::shared_ptr<DpTimeMajorLinearImpl>(out)));
  return Wrap(layer);
}

// Modules whose forward calls their layers through member holders, which a replacement
// cannot reach (file comment of make_private.h).
bool CallsLayersThroughMembers(torch::nn::Module& m) {
  return dynamic_cast<torch::nn::TransformerEncoderLayerImpl*>(&m) != nullptr ||
         dynamic_cast<torch::nn::TransformerDecoderLayerImpl*>(&m) != nullptr;
}

// The module's own (not its children's) parameters: how many, how many trainable.
std::pair<int, int> OwnParameters(const torch::nn::Module& module) {
  int all = 0, trainable = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    ++all;
    trainable += p.value().requires_grad() ? 1 : 0;
  }
  return {all, trainable};
}

// The trainable parameters of `module` and its children.
int64_t TrainableParameters(const torch::nn::Module& module) {
  int64_t trainable = 0;
  for (const auto& p : module.named_parameters()) trainable += p.value().requires_grad() ? 1 : 0;
  return trainable;
}

bool IsBatchNorm(torch::nn::Module& m) {
  return dynamic_cast<torch::nn::BatchNorm1dImpl*>(&m) != nullptr ||
         dynamic_cast<torch::nn::BatchNorm2dImpl*>(&m) != nullptr ||
         dynamic_cast<torch::nn::BatchNorm3dImpl*>(&m) != nullptr;
}

// The replacement of `m` at `path`, or nullptr module when `m` stays (no trainable
// parameters of its own, or already a per-example layer), or the refusal.
absl::StatusOr<Replacement> ReplacementFor(const std::string& path, torch::nn::Module& m) {
  if (dynamic_cast<PerExampleLayer*>(&m) != nullptr) return Replacement{};
  if (IsBatchNorm(m)) {
    return Refuse(path, m,
                  "mixes the examples of a batch, so per-example gradients are undefined: "
                  "use torch::nn::GroupNorm instead");
  }
  if (CallsLayersThroughMembers(m) && TrainableParameters(m) > 0) {
    return Refuse(path, m,
                  "calls its attention, Linear and LayerNorm layers through member holders, "
                  "which cannot be made private (make_private.h): write the block with "
                  "torch::nn::MultiheadAttention, Linear and LayerNorm held in "
                  "torch::nn::Sequential members");
  }
  if (auto* a = dynamic_cast<torch::nn::MultiheadAttentionImpl*>(&m)) {
    // Its parameters and out_proj's are one rule: all trainable, or all frozen (kept).
    const int64_t trainable = TrainableParameters(m);
    if (trainable == 0) return Replacement{};
    if (trainable != static_cast<int64_t>(m.named_parameters().size())) {
      return Refuse(path, m,
                    "has frozen and trainable parameters together (out_proj included): freeze "
                    "all of them or none");
    }
    return ReplaceMultiheadAttention(*a);
  }
  auto [all, trainable] = OwnParameters(m);
  if (trainable == 0) return Replacement{};
  if (trainable != all) {
    return Refuse(path, m,
                  "has frozen and trainable parameters together: freeze all of them or none");
  }
  if (auto* l = dynamic_cast<torch::nn::LinearImpl*>(&m)) return ReplaceLinear(*l);
  if (auto* c = dynamic_cast<torch::nn::Conv1dImpl*>(&m)) return ReplaceConv1d(*c);
  if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(&m)) return ReplaceConv2d(path, *c);
  if (auto* e = dynamic_cast<torch::nn::EmbeddingImpl*>(&m)) return ReplaceEmbedding(path, *e);
  if (auto* n = dynamic_cast<torch::nn::LayerNormImpl*>(&m)) return ReplaceLayerNorm(*n);
  if (auto* g = dynamic_cast<torch::nn::GroupNormImpl*>(&m)) return ReplaceGroupNorm(*g);
  if (auto* r = dynamic_cast<torch::nn::LSTMImpl*>(&m)) return ReplaceRecurrent<DpLSTMImpl>(*r);
  if (auto* r = dynamic_cast<torch::nn::GRUImpl*>(&m)) return ReplaceRecurrent<DpGRUImpl>(*r);
  if (auto* r = dynamic_cast<torch::nn::RNNImpl*>(&m)) return ReplaceRecurrent<DpRNNImpl>(*r);
  if (dynamic_cast<torch::nn::Conv3dImpl*>(&m) != nullptr) {
    return Refuse(path, m,
                  "has no per-example gradient rule (Conv1d and Conv2d have): fold one spatial "
                  "axis into the channels or batch and use torch::nn::Conv2d");
  }
  if (dynamic_cast<torch::nn::ConvTranspose1dImpl*>(&m) != nullptr ||
      dynamic_cast<torch::nn::ConvTranspose2dImpl*>(&m) != nullptr ||
      dynamic_cast<torch::nn::ConvTranspose3dImpl*>(&m) != nullptr) {
    return Refuse(path, m,
                  "has no per-example gradient rule: upsample (torch::nn::Upsample) and use "
                  "torch::nn::Conv1d or Conv2d instead");
  }
  return Refuse(path, m,
                "has trainable parameters without a per-example gradient rule: use "
                "torch::nn::Linear, Conv1d, Conv2d, Embedding, LayerNorm, GroupNorm, "
                "MultiheadAttention, LSTM, GRU or RNN (or a dpkit Dp* layer), or freeze them "
                "(requires_grad false)");
}

struct PlannedReplacement {
  torch::nn::Module* parent;
  std::string name, path;
  std::shared_ptr<torch::nn::Module> old_module;
  Replacement replacement;
};

// Depth first over the tree: the replacements, or the first refusal.
absl::Status Plan(torch::nn::Module& parent, const std::string& prefix,
                  std::vector<PlannedReplacement>* plan) {
  for (const auto& child : parent.named_children()) {
    const std::string path = prefix.empty() ? child.key() : absl::StrCat(prefix, ".", child.key());
    ASSIGN_OR_RETURN(Replacement replacement, ReplacementFor(path, *child.value()));
    if (replacement.module != nullptr) {
      plan->push_back({&parent, child.key(), path, child.value(), std::move(replacement)});
    } else {
      RETURN_IF_ERROR(Plan(*child.value(), path, plan));
    }
  }
  return absl::OkStatus();
}

// Puts the replacement into its parent: the child entry (named_children, parameters) and,
// for the containers that call their modules from their own lists, that list too.
void Apply(PlannedReplacement& r) {
  if (auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(r.parent)) {
    for (torch::nn::AnyModule& any : *seq) {
      if (any.ptr().get() == r.old_module.get()) any = r.replacement.any;
    }
  } else if (auto* list = dynamic_cast<torch::nn::ModuleListImpl*>(r.parent)) {
    for (std::shared_ptr<torch::nn::Module>& m : *list) {
      if (m.get() == r.old_module.get()) m = r.replacement.module;
    }
  } else if (auto* dict = dynamic_cast<torch::nn::ModuleDictImpl*>(r.parent)) {
    dict->update(std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>{
        {r.name, r.replacement.module}});
    return;
  }
  r.parent->replace_module(r.name, r.replacement.module);
}

// Stops backward() when a replaced parameter receives an ordinary gradient (file comment).
void GuardParameters(const std::string& path, torch::nn::Module& module) {
  for (const auto& p : module.named_parameters()) {  // with children (attention's out_proj)
    std::string name = absl::StrCat(path, ".", p.key());
    torch::Tensor tensor = p.value();
    tensor.register_hook([name](const torch::Tensor& grad) -> torch::Tensor {
      TORCH_CHECK(false, "MakePrivate: parameter '", name,
                  "' received an ordinary (unclipped) gradient: the forward pass used it "
                  "outside its per-example layer (a member holder still pointing to the "
                  "original module, or a weight used functionally); call the layers through "
                  "the module tree (e.g. hold the layer in a one-element torch::nn::Sequential)");
      return grad;
    });
  }
}

}  // namespace

absl::Status ConvertToPerExample(torch::nn::Module& model) {
  ASSIGN_OR_RETURN(Replacement root, ReplacementFor("(root)", model));
  if (root.module != nullptr) {
    return Refuse("(root)", model, "is a single layer: wrap it in a torch::nn::Sequential");
  }
  std::vector<PlannedReplacement> plan;
  RETURN_IF_ERROR(Plan(model, "", &plan));
  for (PlannedReplacement& r : plan) {
    Apply(r);
    GuardParameters(r.path, *r.replacement.module);
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::Tensor> PrivateTraining::NextBatch() {
  ASSIGN_OR_RETURN(MicrobatchedBatch batch, sampler_->Next(steps_, *sampling_rng_));
  return torch::tensor(batch.examples, torch::kLong);
}

absl::StatusOr<DpStepResult> PrivateTraining::Step() {
  RETURN_IF_ERROR(optimizer_->AccumulatePhysicalBatch());
  ASSIGN_OR_RETURN(DpStepResult result, optimizer_->Step(steps_));
  ++steps_;
  return result;
}

absl::StatusOr<double> PrivateTraining::Epsilon(double delta) const {
  if (steps_ == 0) return 0.0;
  ASSIGN_OR_RETURN(double epsilon,
                   accounting::DpSgdEpsilon(sampling_rate(), noise_multiplier(), steps_, delta,
                                            accounting::Accountant::kPld));
  return epsilon;
}

absl::StatusOr<std::unique_ptr<PrivateTraining>> MakePrivate(
    torch::nn::Module& model, std::unique_ptr<torch::optim::Optimizer> optimizer,
    const MakePrivateOptions& options) {
  ASSIGN_OR_RETURN(
      StepRecordSampler sampler,
      StepRecordSampler::Create(options.dataset_size, options.expected_batch_size,
                                /*microbatch_size=*/1, /*shuffled=*/false));
  RETURN_IF_ERROR(ConvertToPerExample(model));
  DpOptimizerOptions dp;
  dp.noise_multiplier = options.noise_multiplier;
  dp.clip_norm = options.max_grad_norm;
  dp.sampling_rate = sampler.sampling_rate();
  dp.expected_batch_size = static_cast<double>(options.expected_batch_size);
  ASSIGN_OR_RETURN(std::unique_ptr<mechanisms::SecureRandomGenerator> noise,
                         mechanisms::SecureRandomGenerator::Create());
  ASSIGN_OR_RETURN(std::unique_ptr<mechanisms::SecureRandomGenerator> sampling,
                         mechanisms::SecureRandomGenerator::Create());
  auto training = std::unique_ptr<PrivateTraining>(new PrivateTraining());
  ASSIGN_OR_RETURN(training->optimizer_,
                         DpOptimizer::Create(model, std::move(optimizer), dp, std::move(noise)));
  training->sampler_.emplace(std::move(sampler));
  training->sampling_rng_ = std::move(sampling);
  return training;
}

absl::StatusOr<std::unique_ptr<PrivateTraining>> MakePrivateWithEpsilon(
    torch::nn::Module& model, std::unique_ptr<torch::optim::Optimizer> optimizer,
    MakePrivateOptions options, double target_epsilon, double delta, double epochs) {
  ASSIGN_OR_RETURN(
      StepRecordSampler sampler,
      StepRecordSampler::Create(options.dataset_size, options.expected_batch_size, 1, false));
  if (!(epochs > 0) || !std::isfinite(epochs)) {
    return absl::InvalidArgumentError(absl::StrCat("epochs must be finite and > 0, got ", epochs));
  }
  ASSIGN_OR_RETURN(
      accounting::Calibration calibration,
      accounting::CalibrateNoiseMultiplier(target_epsilon, delta, sampler.sampling_rate(),
                                           sampler.TotalSteps(epochs),
                                           accounting::Accountant::kPld));
  options.noise_multiplier = calibration.noise_multiplier;
  return MakePrivate(model, std::move(optimizer), options);
}

}  // namespace dpkit::optim
