#include "dpkit/optim/torch/per_example_layers.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpkit::optim {

absl::Status ValidateForPerExampleGradients(torch::nn::Module& model,
                                            std::vector<NamedPerExampleLayer>* layers) {
  layers->clear();
  // The root is checked by itself: named_modules(include_self) needs a shared_ptr root.
  std::vector<std::pair<std::string, torch::nn::Module*>> modules = {{"(root)", &model}};
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    modules.emplace_back(item.key(), item.value().get());
  }
  for (const auto& [name, module] : modules) {
    std::string type = module->name();
    if (auto* layer = dynamic_cast<PerExampleLayer*>(module)) {
      layers->push_back({name, layer});
      continue;
    }
    if (dynamic_cast<torch::nn::BatchNorm1dImpl*>(module) != nullptr ||
        dynamic_cast<torch::nn::BatchNorm2dImpl*>(module) != nullptr ||
        dynamic_cast<torch::nn::BatchNorm3dImpl*>(module) != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "module '", name, "' (", type,
          ") mixes the examples of a batch, so per-example gradients and DP-SGD's "
          "sensitivity are undefined: use GroupNorm (dpkit::optim::DpGroupNorm) instead"));
    }
    bool has_trainable = false;
    for (const auto& p : module->named_parameters(/*recurse=*/false)) {
      has_trainable = has_trainable || p.value().requires_grad();
    }
    if (has_trainable) {
      return absl::InvalidArgumentError(absl::StrCat(
          "module '", name, "' (", type,
          ") has trainable parameters without a per-example gradient rule; supported: "
          "DpLinear, DpConv1d, DpConv2d, DpEmbedding, DpGroupNorm, DpLayerNorm, "
          "DpTorchMultiheadAttention, DpLSTM, DpGRU, DpRNN (with any parameter-free "
          "activations and pooling between them)"));
    }
  }
  if (layers->empty()) {
    return absl::InvalidArgumentError("model has no trainable per-example layers");
  }
  return absl::OkStatus();
}

}  // namespace dpkit::optim
