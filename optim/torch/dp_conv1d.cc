#include "dpkit/optim/torch/dp_conv1d.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;
using per_example_internal::AddWeightedSum;
using per_example_internal::BatchedFrobeniusInner;
using per_example_internal::Bmm;
using per_example_internal::BmmOut;
using per_example_internal::CheckCapture;
using per_example_internal::ConvGeometry;
using per_example_internal::ForEachChunkInParallel;
using per_example_internal::FromHandle;
using per_example_internal::GroupRows;
using per_example_internal::ParallelParts;
using per_example_internal::PerExampleBuffer;
using per_example_internal::PositionSquaredNorms;
using per_example_internal::SquaredNorms;
using per_example_internal::ToHandle;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// torch::conv1d as torch::nn::Conv1d calls it: `padding` "same" / "valid" (aten's
// convolution works out and applies the padding, so the bits are torch's), or the numbers
// (left = right) when `padding` is empty.
torch::Tensor Conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                     const c10::optional<torch::Tensor>& bias, int64_t stride,
                     const std::string& padding,
                     int64_t left, int64_t dilation, int64_t groups) {
  if (padding.empty()) return torch::conv1d(x, weight, bias, stride, left, dilation, groups);
  return torch::conv1d(x, weight, bias, stride, padding, dilation, groups);
}

// The convolution, whose backward returns dL/d(input) only and keeps dL/d(output) in the
// capture: the weight gradient is assembled later with per-example clip factors. The
// convolution zero-pads `left` before and `right` (>= left) after each sequence. (The bias
// is optional: an undefined tensor cannot be an input of a custom autograd function.)
struct Conv1dFunction : public torch::autograd::Function<Conv1dFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias,
                               int64_t handle, int64_t stride, std::string padding,
                               int64_t left, int64_t right, int64_t dilation, int64_t groups) {
    ctx->saved_data["capture"] = handle;
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["left"] = left;
    ctx->saved_data["right"] = right;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["groups"] = groups;
    ctx->save_for_backward({input, weight});
    FromHandle(handle)->activation = input.detach();
    return Conv1d(input, weight, bias, stride, padding, left, dilation, groups);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    torch::Tensor g = grad_outputs[0];
    FromHandle(ctx)->backprop = g;
    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) {
      variable_list saved = ctx->get_saved_variables();
      const int64_t left = ctx->saved_data["left"].toInt();
      const int64_t extra = ctx->saved_data["right"].toInt() - left;
      // Asymmetric "same": the input with its extra right zeros, then symmetric padding.
      torch::Tensor x = extra > 0 ? torch::constant_pad_nd(saved[0], {0, extra}) : saved[0];
      grad_input = std::get<0>(at::convolution_backward(
          g, x, saved[1], at::OptionalIntArrayRef{}, {ctx->saved_data["stride"].toInt()},
          {left}, {ctx->saved_data["dilation"].toInt()}, /*transposed=*/false,
          /*output_padding=*/{0}, ctx->saved_data["groups"].toInt(), {true, false, false}));
      if (extra > 0) grad_input = grad_input.narrow(2, 0, saved[0].size(2));
    }
    return {grad_input,      torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

// LibTorch 1.13's F::pad mode for a convolution padding mode (not zeros).
F::PadFuncOptions::mode_t PadMode(const torch::nn::Conv1dOptions::padding_mode_t& mode) {
  if (c10::holds_alternative<torch::enumtype::kReflect>(mode)) return torch::kReflect;
  if (c10::holds_alternative<torch::enumtype::kReplicate>(mode)) return torch::kReplicate;
  return torch::kCircular;
}

}  // namespace

DpConv1dImpl::DpConv1dImpl(const torch::nn::Conv1dOptions& options) : options_(options) {
  const int64_t in = options.in_channels(), out = options.out_channels();
  const int64_t k = (*options.kernel_size())[0], groups = options.groups();
  const int64_t stride = (*options.stride())[0], dilation = (*options.dilation())[0];
  TORCH_CHECK(in > 0 && out > 0 && k > 0 && stride > 0 && dilation > 0 && groups > 0,
              "DpConv1d: channels, kernel_size, stride, dilation and groups must be > 0");
  TORCH_CHECK(in % groups == 0 && out % groups == 0,
              "DpConv1d: in_channels and out_channels must be divisible by groups");
  // The padding torch::nn::Conv1d applies (ConvNdImpl::reset): "same" puts
  // total = dilation (k - 1) as total / 2 before and the rest after (stride 1 only).
  const bool zeros = c10::holds_alternative<torch::enumtype::kZeros>(options.padding_mode());
  if (const auto* numbers = c10::get_if<torch::ExpandingArray<1>>(&options.padding())) {
    pad_left_ = pad_right_ = (**numbers)[0];
    TORCH_CHECK(pad_left_ >= 0, "DpConv1d: padding must be >= 0");
  } else if (c10::holds_alternative<torch::enumtype::kSame>(options.padding())) {
    TORCH_CHECK(stride == 1, "DpConv1d: padding \"same\" needs stride 1");
    pad_left_ = dilation * (k - 1) / 2;
    pad_right_ = dilation * (k - 1) - pad_left_;
  }
  // The convolution's own zero padding; the other modes pad the input first (forward).
  if (zeros) conv_left_ = pad_left_, conv_right_ = pad_right_;
  // torch::nn::Conv1d's reset_parameters, op for op (same values from the same seed).
  weight = register_parameter("weight", torch::empty({out, in / groups, k}));
  torch::nn::init::kaiming_uniform_(weight, /*a=*/std::sqrt(5));
  if (options.bias()) {
    bias = register_parameter("bias", torch::empty({out}));
    const int64_t fan_in = std::get<0>(torch::nn::init::_calculate_fan_in_and_fan_out(weight));
    const double bound = 1 / std::sqrt(fan_in);
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

std::vector<torch::Tensor> DpConv1dImpl::DpParameters() {
  if (bias.defined()) return {weight, bias};
  return {weight};
}

torch::Tensor DpConv1dImpl::forward(const torch::Tensor& input) {
  TORCH_CHECK(input.dim() == 3 && input.size(1) == options_.in_channels(), Describe(),
              ": input must be (B, ", options_.in_channels(), ", L), got ", input.sizes());
  ClearCapture();
  const int64_t stride = (*options_.stride())[0], dilation = (*options_.dilation())[0];
  const int64_t groups = options_.groups();
  torch::Tensor x = input;
  std::string padding;  // torch's own padding argument: "same", "valid", or numbers
  if (!c10::holds_alternative<torch::enumtype::kZeros>(options_.padding_mode())) {
    // Conv1dImpl::forward: F::pad by the mode, then the convolution without padding.
    x = F::pad(input, F::PadFuncOptions({pad_left_, pad_right_})
                          .mode(PadMode(options_.padding_mode())));
  } else if (c10::holds_alternative<torch::enumtype::kSame>(options_.padding())) {
    padding = "same";
  } else if (c10::holds_alternative<torch::enumtype::kValid>(options_.padding())) {
    padding = "valid";
  }
  if (!torch::GradMode::is_enabled()) {
    return Conv1d(x, weight, bias, stride, padding, conv_left_, dilation, groups);
  }
  const c10::optional<torch::Tensor> optional_bias =
      bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  return Conv1dFunction::apply(x, weight, optional_bias, ToHandle(&capture_), stride, padding,
                               conv_left_, conv_right_, dilation, groups);
}

torch::Tensor DpConv1dImpl::UnfoldRows(const torch::Tensor& x) const {
  const int64_t k = (*options_.kernel_size())[0];
  const int64_t stride = (*options_.stride())[0], dilation = (*options_.dilation())[0];
  const int64_t out_length =
      (x.size(2) + conv_left_ + conv_right_ - dilation * (k - 1) - 1) / stride + 1;
  TORCH_CHECK(out_length > 0, Describe(), ": input ", x.sizes(), " is shorter than the kernel");
  // An extra zero after each sequence (asymmetric "same"), then symmetric padding.
  torch::Tensor padded =
      conv_right_ > conv_left_ ? torch::constant_pad_nd(x, {0, conv_right_ - conv_left_}) : x;
  // A sequence is an image of height 1 (per_example_kernels.h's im2row).
  return per_example_internal::UnfoldRows(
      padded.unsqueeze(2), ConvGeometry{{1, k}, {1, stride}, {0, conv_left_}, {1, dilation}},
      1, out_length);
}

torch::Tensor DpConv1dImpl::UnfoldedRows() {
  if (!unfolded_.defined()) unfolded_ = UnfoldRows(capture_.activation);
  return unfolded_;
}

int64_t DpConv1dImpl::UnfoldChunk() const {
  // As DpConv2d::UnfoldChunk: a chunk of rows stays in the core's L2 cache from im2row to
  // the product.
  constexpr int64_t kUnfoldBytes = int64_t{1} << 19;
  const int64_t row = options_.in_channels() * (*options_.kernel_size())[0];
  return std::max<int64_t>(1, kUnfoldBytes / std::max<int64_t>(
                                  1, row * capture_.backprop.size(2) *
                                         capture_.activation.element_size()));
}

bool DpConv1dImpl::UseGhost() const {
  if (method_ != NormMethod::kAuto) return method_ == NormMethod::kGhost;
  // DpConv2d::UseGhost's rule per group (c k columns, o rows, L positions): ghost norms
  // only save memory, so only past the buffer limit and where L (c k + o) < c k o
  // (Li et al. 2021, Sec. 4).
  const int64_t groups = options_.groups(), positions = capture_.backprop.size(2);
  const int64_t cols = options_.in_channels() / groups * (*options_.kernel_size())[0];
  const int64_t rows = options_.out_channels() / groups;
  const int64_t buffer_bytes = capture_.backprop.size(0) * options_.out_channels() * cols *
                               capture_.backprop.element_size();
  return buffer_bytes > kMaxPerExampleBufferBytes && positions * (cols + rows) < cols * rows;
}

void DpConv1dImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  const torch::Tensor& a = capture_.activation;
  const torch::Tensor& g = capture_.backprop;  // (B, out, L)
  const int64_t batch = a.size(0), groups = options_.groups();
  const int64_t rows = options_.out_channels() / groups;
  const int64_t cols = options_.in_channels() / groups * (*options_.kernel_size())[0];
  const bool ghost = UseGhost();
  per_example_valid_ = false;
  torch::Tensor norms = torch::zeros({batch}, a.options().dtype(torch::kFloat64));
  torch::Tensor per;
  if (!ghost) per = PerExampleBuffer(&per_example_, a.options(), {batch, rows * groups, cols});
  // Chunks of examples over LibTorch's threads, each writing its own rows (DpConv2d).
  ForEachChunkInParallel(batch, UnfoldChunk(), a.is_cpu(),
                         [&](int64_t /*part*/, int64_t start, int64_t len) {
    torch::Tensor u = UnfoldRows(a.narrow(0, start, len));  // (len, L, C k)
    torch::Tensor gc = g.narrow(0, start, len);             // (len, out, L)
    for (int64_t j = 0; j < groups; ++j) {
      torch::Tensor uj = u.narrow(2, j * cols, cols), gj = gc.narrow(1, j * rows, rows);
      if (ghost) {
        // Li et al. 2021, eq. (4) per group: <U U^T, G^T G>_F; groups are disjoint blocks.
        norms.narrow(0, start, len)
            .add_(BatchedFrobeniusInner(Bmm(uj, uj.transpose(1, 2)), Bmm(gj.transpose(1, 2), gj)));
      } else {
        BmmOut(per.narrow(0, start, len).narrow(1, j * rows, rows), gj, uj);  // G_ij U_ij
      }
    }
    if (!ghost) norms.narrow(0, start, len).copy_(SquaredNorms(per.narrow(0, start, len)));
  });
  per_example_valid_ = !ghost;
  out->push_back(norms);
  if (bias.defined()) out->push_back(SquaredNorms(g.sum(2)));
}

std::vector<torch::Tensor> DpConv1dImpl::PerExampleGradients() {
  CheckCapture(*this);
  torch::Tensor u = UnfoldedRows();  // (B, L, C k)
  const torch::Tensor& g = capture_.backprop;
  const int64_t groups = options_.groups(), rows = options_.out_channels() / groups;
  const int64_t cols = u.size(2) / groups;
  std::vector<torch::Tensor> blocks;
  for (int64_t j = 0; j < groups; ++j) {
    blocks.push_back(torch::bmm(g.narrow(1, j * rows, rows), u.narrow(2, j * cols, cols)));
  }
  std::vector<int64_t> shape = weight.sizes().vec();
  shape.insert(shape.begin(), u.size(0));
  std::vector<torch::Tensor> out = {torch::cat(blocks, 1).view(shape)};
  if (bias.defined()) out.push_back(g.sum(2));
  return out;
}

void DpConv1dImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  per_example_valid_ = false;
  torch::Tensor u = UnfoldedRows();  // (B, L, C k)
  const torch::Tensor& g = capture_.backprop;
  const int64_t m = microbatches.size(0), groups = options_.groups();
  const int64_t rows = options_.out_channels() / groups, cols = u.size(2) / groups;
  // Positions of a microbatch = the output positions of all its examples.
  torch::Tensor a = GroupRows(u, microbatches).reshape({m, -1, u.size(2)});
  torch::Tensor gm =
      GroupRows(g.transpose(1, 2), microbatches).reshape({m, -1, options_.out_channels()});
  torch::Tensor norms = torch::zeros({m}, a.options().dtype(torch::kFloat64));
  for (int64_t j = 0; j < groups; ++j) {
    norms.add_(PositionSquaredNorms(a.narrow(2, j * cols, cols).contiguous(),
                                    gm.narrow(2, j * rows, rows).contiguous(), method_));
  }
  out->push_back(norms);
  if (bias.defined()) out->push_back(SquaredNorms(GroupRows(g.sum(2), microbatches).sum(1)));
}

void DpConv1dImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                         std::vector<torch::Tensor>* sums) {
  CheckCapture(*this);
  const size_t count = bias.defined() ? 2 : 1;
  TORCH_CHECK(scales.size() == count && sums->size() == count, Describe(), ": expected ",
              count, " scale vectors and sums");
  const torch::Tensor& a = capture_.activation;
  const torch::Tensor& g = capture_.backprop;  // (B, out, L)
  const int64_t batch = a.size(0), out_channels = options_.out_channels();
  const int64_t groups = options_.groups(), rows = out_channels / groups;
  const int64_t cols = weight.numel() / out_channels;
  if (per_example_valid_) {
    AddWeightedSum(scales[0], per_example_, &(*sums)[0]);
  } else {
    // sum_i s_i G_ij U_ij per group as one product over all positions of the batch, per
    // chunk of examples and part of the batch (one per thread), as DpConv2d does.
    const int64_t parts = ParallelParts(batch, a.is_cpu());
    torch::Tensor s0 = scales[0].to(g.scalar_type());
    torch::Tensor partial = torch::zeros({parts, out_channels, cols}, g.options());
    ForEachChunkInParallel(batch, UnfoldChunk(), a.is_cpu(),
                           [&](int64_t part, int64_t start, int64_t len) {
      torch::Tensor u = UnfoldRows(a.narrow(0, start, len)).reshape({-1, groups * cols});
      torch::Tensor gs = (g.narrow(0, start, len) * s0.narrow(0, start, len).view({len, 1, 1}))
                             .transpose(1, 2)
                             .reshape({-1, out_channels});  // (len L, out)
      for (int64_t j = 0; j < groups; ++j) {
        partial.select(0, part)
            .narrow(0, j * rows, rows)
            .addmm_(gs.narrow(1, j * rows, rows).t(), u.narrow(1, j * cols, cols));
      }
    });
    (*sums)[0].add_(partial.sum(0).view_as((*sums)[0]));
  }
  if (bias.defined()) (*sums)[1].addmv_(g.sum(2).t(), scales[1].to(g.scalar_type()));
}

void DpConv1dImpl::ClearCapture() {
  capture_.Clear();
  unfolded_ = torch::Tensor();
  per_example_ = torch::Tensor();
  per_example_valid_ = false;
}

std::string DpConv1dImpl::Describe() const {
  return absl::StrCat("DpConv1d(", options_.in_channels(), ", ", options_.out_channels(),
                      ", kernel ", (*options_.kernel_size())[0], ", stride ",
                      (*options_.stride())[0], ", groups ", options_.groups(), ")");
}

}  // namespace dpkit::optim
