#include "dpkit/optim/torch/dp_affine_norm.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim {
namespace {

using per_example_internal::AddWeightedSum;
using per_example_internal::CheckCapture;
using per_example_internal::FromHandle;
using per_example_internal::GroupRows;
using per_example_internal::SquaredNorms;
using per_example_internal::ToHandle;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = x_hat * w + b with w, b already shaped to broadcast against x_hat.
struct AffineFunction : public torch::autograd::Function<AffineFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& normalized,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t handle) {
    ctx->saved_data["capture"] = handle;
    ctx->save_for_backward({weight});
    FromHandle(handle)->activation = normalized.detach();
    return torch::addcmul(bias, normalized, weight);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    torch::Tensor g = grad_outputs[0];
    FromHandle(ctx)->backprop = g;
    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) grad_input = g * ctx->get_saved_variables()[0];
    return {grad_input, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Shared by GroupNorm and LayerNorm: the norms and clipped sums of the affine weight and
// bias from their per-example gradients (PerExampleGradients: one entry per channel or
// normalised element per example, small enough to materialise).
void AppendAffineSquaredNorms(const std::vector<torch::Tensor>& per,
                              std::vector<torch::Tensor>* out) {
  for (const torch::Tensor& p : per) out->push_back(SquaredNorms(p));
}

void AppendAffineMicrobatchSquaredNorms(const std::vector<torch::Tensor>& per,
                                        const torch::Tensor& microbatches,
                                        std::vector<torch::Tensor>* out) {
  for (const torch::Tensor& p : per) {
    out->push_back(SquaredNorms(GroupRows(p, microbatches).sum(1)));
  }
}

void AddAffineScaledGradientSums(PerExampleLayer& layer,
                                 const std::vector<torch::Tensor>& scales,
                                 std::vector<torch::Tensor>* sums) {
  TORCH_CHECK(scales.size() == 2 && sums->size() == 2, layer.Describe(),
              ": expected 2 scale vectors and 2 sums");
  const std::vector<torch::Tensor> per = layer.PerExampleGradients();
  for (size_t k = 0; k < 2; ++k) AddWeightedSum(scales[k], per[k], &(*sums)[k]);
}

}  // namespace

DpGroupNormImpl::DpGroupNormImpl(int64_t num_groups, int64_t num_channels, double eps)
    : num_groups_(num_groups), num_channels_(num_channels), eps_(eps) {
  TORCH_CHECK(num_groups > 0 && num_channels > 0 && num_channels % num_groups == 0,
              "DpGroupNorm: num_channels must be a positive multiple of num_groups");
  weight = register_parameter("weight", torch::ones({num_channels}));
  bias = register_parameter("bias", torch::zeros({num_channels}));
}

torch::Tensor DpGroupNormImpl::forward(const torch::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2 && input.size(1) == num_channels_, Describe(),
              ": input must be (B, ", num_channels_, ", ...), got ", input.sizes());
  ClearCapture();
  torch::Tensor normalized = torch::group_norm(input, num_groups_, {}, {}, eps_);
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = num_channels_;
  if (!torch::GradMode::is_enabled()) {
    return torch::addcmul(bias.view(shape), normalized, weight.view(shape));
  }
  return AffineFunction::apply(normalized, weight.view(shape), bias.view(shape),
                               ToHandle(&capture_));
}

int64_t DpGroupNormImpl::CapturedBatchSize() const { return capture_.activation.size(0); }

std::vector<torch::Tensor> DpGroupNormImpl::PerExampleGradients() {
  CheckCapture(*this);
  int64_t batch = capture_.activation.size(0);
  torch::Tensor g = capture_.backprop.reshape({batch, num_channels_, -1});
  torch::Tensor x = capture_.activation.reshape({batch, num_channels_, -1});
  return {(g * x).sum(2), g.sum(2)};
}

void DpGroupNormImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  AppendAffineSquaredNorms(PerExampleGradients(), out);
}

void DpGroupNormImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                   std::vector<torch::Tensor>* out) {
  AppendAffineMicrobatchSquaredNorms(PerExampleGradients(), microbatches, out);
}

void DpGroupNormImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                            std::vector<torch::Tensor>* sums) {
  AddAffineScaledGradientSums(*this, scales, sums);
}

std::string DpGroupNormImpl::Describe() const {
  return absl::StrCat("DpGroupNorm(", num_groups_, ", ", num_channels_, ")");
}

// -------------------------------------------------------------------------- LayerNorm
DpLayerNormImpl::DpLayerNormImpl(std::vector<int64_t> normalized_shape, double eps)
    : normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  TORCH_CHECK(!normalized_shape_.empty(), "DpLayerNorm: normalized_shape must be non-empty");
  weight = register_parameter("weight", torch::ones(normalized_shape_));
  bias = register_parameter("bias", torch::zeros(normalized_shape_));
}

torch::Tensor DpLayerNormImpl::forward(const torch::Tensor& input) {
  int64_t k = static_cast<int64_t>(normalized_shape_.size());
  TORCH_CHECK(input.dim() > k &&
                  input.sizes().slice(input.dim() - k).vec() == normalized_shape_,
              Describe(), ": input must be (B, ..., normalized_shape), got ", input.sizes());
  ClearCapture();
  torch::Tensor normalized = torch::layer_norm(input, normalized_shape_, {}, {}, eps_);
  if (!torch::GradMode::is_enabled()) return torch::addcmul(bias, normalized, weight);
  return AffineFunction::apply(normalized, weight, bias, ToHandle(&capture_));
}

int64_t DpLayerNormImpl::CapturedBatchSize() const { return capture_.activation.size(0); }

std::vector<torch::Tensor> DpLayerNormImpl::PerExampleGradients() {
  CheckCapture(*this);
  int64_t batch = capture_.activation.size(0);
  int64_t n = weight.numel();
  torch::Tensor g = capture_.backprop.reshape({batch, -1, n});
  torch::Tensor x = capture_.activation.reshape({batch, -1, n});
  std::vector<int64_t> shape = normalized_shape_;
  shape.insert(shape.begin(), batch);
  return {(g * x).sum(1).view(shape), g.sum(1).view(shape)};
}

void DpLayerNormImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  AppendAffineSquaredNorms(PerExampleGradients(), out);
}

void DpLayerNormImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                   std::vector<torch::Tensor>* out) {
  AppendAffineMicrobatchSquaredNorms(PerExampleGradients(), microbatches, out);
}

void DpLayerNormImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                            std::vector<torch::Tensor>* sums) {
  AddAffineScaledGradientSums(*this, scales, sums);
}

std::string DpLayerNormImpl::Describe() const {
  return absl::StrCat("DpLayerNorm([", absl::StrJoin(normalized_shape_, ", "), "])");
}

}  // namespace dpkit::optim
