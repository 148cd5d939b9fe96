#include "dpkit/optim/torch/dp_linear.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim {
namespace {

using per_example_internal::AddWeightedSum;
using per_example_internal::BatchedFrobeniusInner;
using per_example_internal::CheckCapture;
using per_example_internal::FromHandle;
using per_example_internal::GroupRows;
using per_example_internal::ParallelBmm;
using per_example_internal::ParallelBmmOut;
using per_example_internal::PerExampleBuffer;
using per_example_internal::PositionSquaredNorms;
using per_example_internal::SquaredNorms;
using per_example_internal::ToHandle;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// z = a W^T + b (b optional: an undefined tensor cannot be an input of a custom function).
// Backward returns dL/da only; the weight gradient is assembled later from the capture with
// per-example clip factors.
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias, int64_t handle) {
    ctx->saved_data["capture"] = handle;
    ctx->save_for_backward({weight});
    FromHandle(handle)->activation = input.detach();
    torch::Tensor rows = input.reshape({-1, input.size(-1)});
    torch::Tensor z = bias.has_value() ? torch::addmm(*bias, rows, weight.t())
                                       : torch::mm(rows, weight.t());
    return z.view([&] {
          std::vector<int64_t> s = input.sizes().vec();
          s.back() = weight.size(0);
          return s;
        }());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    torch::Tensor g = grad_outputs[0];
    FromHandle(ctx)->backprop = g;
    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) grad_input = g.matmul(ctx->get_saved_variables()[0]);
    return {grad_input, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Whether a materialised (B, out, in) buffer is kept from the norms to the clipped sum.
// Over sequences (T > 1) kAuto releases it at once: kept, the buffers of ALL such layers
// live together until the clip factors are known, on top of the captured activations and
// backprops (a 2-block transformer's DP step, d 128, T 128, batch 64, held 282 MB of live
// tensors against the non-private step's 173 MB, 1.63x; benchmarks/transformer_benchmark).
// Released, one layer's buffer is live at a time and the clipped sum is the product over
// all positions in AddScaledGradientSums, which costs what the non-private weight gradient
// costs. kMaterialize (and a single position, where the buffer is no larger than the
// capture) keeps it and sums the buffer instead.
bool KeepPerExampleGradients(NormMethod method, int64_t positions) {
  return method == NormMethod::kMaterialize || positions == 1;
}

}  // namespace

DpLinearImpl::DpLinearImpl(int64_t in_features, int64_t out_features, bool has_bias)
    : in_features_(in_features), out_features_(out_features), has_bias_(has_bias) {
  TORCH_CHECK(in_features > 0 && out_features > 0, "DpLinear: sizes must be > 0");
  double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight",
                              torch::empty({out_features, in_features}).uniform_(-bound, bound));
  if (has_bias_) {
    bias = register_parameter("bias", torch::empty({out_features}).uniform_(-bound, bound));
  }
}

std::vector<torch::Tensor> DpLinearImpl::DpParameters() {
  if (has_bias_) return {weight, bias};
  return {weight};
}

torch::Tensor DpLinearImpl::forward(const torch::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2 && input.size(-1) == in_features_, Describe(),
              ": input must be (B, ..., ", in_features_, "), got ", input.sizes());
  ClearCapture();
  if (!torch::GradMode::is_enabled()) return torch::nn::functional::linear(input, weight, bias);
  const c10::optional<torch::Tensor> optional_bias =
      has_bias_ ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  return LinearFunction::apply(input, weight, optional_bias, ToHandle(&capture_));
}

int64_t DpLinearImpl::CapturedBatchSize() const { return capture_.activation.size(0); }
torch::Tensor DpLinearImpl::A() const {
  return capture_.activation.reshape({capture_.activation.size(0), -1, in_features_});
}
torch::Tensor DpLinearImpl::G() const {
  return capture_.backprop.reshape({capture_.backprop.size(0), -1, out_features_});
}

bool DpLinearImpl::UseGhost() const {
  if (method_ != NormMethod::kAuto) return method_ == NormMethod::kGhost;
  // Li et al. 2021, Sec. 4: ghost norms cost T^2 (d + p) per example, materialising T d p.
  int64_t t = A().size(1);
  return t * (in_features_ + out_features_) < in_features_ * out_features_;
}

void DpLinearImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  torch::Tensor a = A(), g = G();
  int64_t batch = a.size(0);
  per_example_valid_ = false;
  if (UseGhost()) {
    if (a.size(1) == 1) {
      // ||g a^T||_F^2 = ||g||^2 ||a||^2 for a single position.
      out->push_back(SquaredNorms(a).mul_(SquaredNorms(g)));
    } else {
      // Li et al. 2021, eq. (4): <A A^T, G G^T>_F.
      torch::Tensor aa = ParallelBmm(a, a.transpose(1, 2));
      torch::Tensor gg = ParallelBmm(g, g.transpose(1, 2));
      out->push_back(BatchedFrobeniusInner(aa, gg));
    }
  } else {
    torch::Tensor per = PerExampleBuffer(&per_example_, a.options(),
                                         {batch, out_features_, in_features_});
    ParallelBmmOut(per, g.transpose(1, 2), a);
    out->push_back(SquaredNorms(per));
    if (KeepPerExampleGradients(method_, a.size(1))) {
      per_example_valid_ = true;
    } else {
      per_example_ = torch::Tensor();  // the clipped sum: one product over all positions
    }
  }
  if (has_bias_) out->push_back(SquaredNorms(g.sum(1)));
}

std::vector<torch::Tensor> DpLinearImpl::PerExampleGradients() {
  CheckCapture(*this);
  torch::Tensor a = A(), g = G();
  if (!has_bias_) return {torch::bmm(g.transpose(1, 2), a)};
  return {torch::bmm(g.transpose(1, 2), a), g.sum(1)};
}

void DpLinearImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  per_example_valid_ = false;
  const int64_t m = microbatches.size(0);
  // A microbatch is one record whose positions are its examples' positions.
  torch::Tensor a = GroupRows(A(), microbatches).reshape({m, -1, in_features_});
  torch::Tensor g = GroupRows(G(), microbatches).reshape({m, -1, out_features_});
  out->push_back(PositionSquaredNorms(a, g, method_));
  if (has_bias_) out->push_back(SquaredNorms(g.sum(1)));
}

void DpLinearImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                         std::vector<torch::Tensor>* sums) {
  CheckCapture(*this);
  const size_t n = has_bias_ ? 2 : 1;
  TORCH_CHECK(scales.size() == n && sums->size() == n, Describe(), ": expected ", n,
              " scale vectors and ", n, " sums");
  torch::Tensor a = A(), g = G();
  int64_t batch = a.size(0);
  if (per_example_valid_) {
    AddWeightedSum(scales[0], per_example_, &(*sums)[0]);
  } else {
    // sum_i s_i G_i^T A_i as one product over all positions of the batch, scaling the
    // smaller of G and A (the only batch-sized temporary here).
    torch::Tensor s0 = scales[0].to(g.scalar_type()).view({batch, 1, 1});
    if (in_features_ <= out_features_) {
      (*sums)[0].addmm_(g.reshape({-1, out_features_}).t(), (a * s0).reshape({-1, in_features_}));
    } else {
      (*sums)[0].addmm_((g * s0).reshape({-1, out_features_}).t(), a.reshape({-1, in_features_}));
    }
  }
  if (has_bias_) (*sums)[1].addmv_(g.sum(1).t(), scales[1].to(g.scalar_type()));
}

void DpLinearImpl::ClearCapture() {
  capture_.Clear();
  per_example_ = torch::Tensor();
  per_example_valid_ = false;
}

std::string DpLinearImpl::Describe() const {
  return absl::StrCat("DpLinear(", in_features_, ", ", out_features_,
                      has_bias_ ? "" : ", bias=false", ")");
}

}  // namespace dpkit::optim
