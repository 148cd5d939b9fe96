#include "dpkit/optim/torch/dp_conv2d.h"

#include <algorithm>
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

// The bias is optional (an undefined tensor cannot be an input of a custom function).
struct Conv2dFunction : public torch::autograd::Function<Conv2dFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias,
                               int64_t handle, std::vector<int64_t> stride,
                               std::vector<int64_t> padding, std::vector<int64_t> dilation) {
    ctx->saved_data["capture"] = handle;
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->save_for_backward({input, weight});
    FromHandle(handle)->activation = input.detach();
    return torch::conv2d(input, weight, bias, stride, padding, dilation);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    torch::Tensor g = grad_outputs[0];
    FromHandle(ctx)->backprop = g;
    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) {
      variable_list saved = ctx->get_saved_variables();
      grad_input = std::get<0>(at::convolution_backward(
          g, saved[0], saved[1], at::OptionalIntArrayRef{}, ctx->saved_data["stride"].toIntVector(),
          ctx->saved_data["padding"].toIntVector(), ctx->saved_data["dilation"].toIntVector(),
          /*transposed=*/false, /*output_padding=*/{0, 0}, /*groups=*/1,
          {true, false, false}));
    }
    return {grad_input,     torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

DpConv2dImpl::DpConv2dImpl(const DpConv2dOptions& options) : options_(options) {
  TORCH_CHECK(options.in_channels > 0 && options.out_channels > 0 &&
                  options.kernel_size[0] > 0 && options.kernel_size[1] > 0 &&
                  options.stride[0] > 0 && options.stride[1] > 0 &&
                  options.padding[0] >= 0 && options.padding[1] >= 0 &&
                  options.dilation[0] > 0 && options.dilation[1] > 0,
              "DpConv2d: sizes, strides and dilations must be > 0, padding >= 0");
  int64_t fan_in = options.in_channels * options.kernel_size[0] * options.kernel_size[1];
  double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight = register_parameter(
      "weight", torch::empty({options.out_channels, options.in_channels,
                              options.kernel_size[0], options.kernel_size[1]})
                    .uniform_(-bound, bound));
  if (options.bias) {
    bias = register_parameter("bias",
                              torch::empty({options.out_channels}).uniform_(-bound, bound));
  }
}

std::vector<torch::Tensor> DpConv2dImpl::DpParameters() {
  if (options_.bias) return {weight, bias};
  return {weight};
}

torch::Tensor DpConv2dImpl::forward(const torch::Tensor& input) {
  TORCH_CHECK(input.dim() == 4 && input.size(1) == options_.in_channels, Describe(),
              ": input must be (B, ", options_.in_channels, ", H, W), got ", input.sizes());
  ClearCapture();
  std::vector<int64_t> stride(options_.stride.begin(), options_.stride.end());
  std::vector<int64_t> padding(options_.padding.begin(), options_.padding.end());
  std::vector<int64_t> dilation(options_.dilation.begin(), options_.dilation.end());
  if (!torch::GradMode::is_enabled()) {
    return torch::conv2d(input, weight, bias, stride, padding, dilation);
  }
  const c10::optional<torch::Tensor> optional_bias =
      options_.bias ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  return Conv2dFunction::apply(input, weight, optional_bias, ToHandle(&capture_), stride,
                               padding, dilation);
}

int64_t DpConv2dImpl::CapturedBatchSize() const { return capture_.activation.size(0); }

torch::Tensor DpConv2dImpl::UnfoldRows(const torch::Tensor& input) const {
  const DpConv2dOptions& o = options_;
  const int64_t out_h =
      (input.size(2) + 2 * o.padding[0] - o.dilation[0] * (o.kernel_size[0] - 1) - 1) / o.stride[0] + 1;
  const int64_t out_w =
      (input.size(3) + 2 * o.padding[1] - o.dilation[1] * (o.kernel_size[1] - 1) - 1) / o.stride[1] + 1;
  TORCH_CHECK(out_h > 0 && out_w > 0, Describe(), ": input ", input.sizes(),
              " is smaller than the kernel");
  // im2row (per_example_kernels.h): our own for CPU float32/float64, else LibTorch's.
  return per_example_internal::UnfoldRows(
      input, ConvGeometry{o.kernel_size, o.stride, o.padding, o.dilation}, out_h, out_w);
}

torch::Tensor DpConv2dImpl::UnfoldedRows() {
  if (!unfolded_.defined()) unfolded_ = UnfoldRows(capture_.activation);
  return unfolded_;
}

int64_t DpConv2dImpl::UnfoldChunk() const {
  // im2row a few examples at a time: the whole batch's rows (B x L x Ckk; 12.8 MB for the
  // MNIST CNN's first layer at B = 256) would be the largest buffer of a DP step, and a
  // chunk of 512 KiB stays in the core's L2 cache from im2row to the product.
  constexpr int64_t kUnfoldBytes = int64_t{1} << 19;
  const int64_t positions = capture_.backprop.size(2) * capture_.backprop.size(3);
  const int64_t ckk = options_.in_channels * options_.kernel_size[0] * options_.kernel_size[1];
  return std::max<int64_t>(
      1, kUnfoldBytes / std::max<int64_t>(1, ckk * positions * capture_.activation.element_size()));
}

bool DpConv2dImpl::UseGhost() const {
  if (method_ != NormMethod::kAuto) return method_ == NormMethod::kGhost;
  // Multiply-adds per example (L = output positions): materialised norms L Ckk out, after
  // which the clipped sum is a weighted sum of the buffer (Ckk out); ghost norms
  // L^2 (Ckk + out), after which the clipped sum needs the products G_i U_i again (a second
  // im2row and L Ckk out). So ghost norms only save memory: they are used when the
  // per-example buffer (B x out x Ckk) would exceed kMaxPerExampleBufferBytes and ghost norms
  // are also cheaper than materialising (Li et al. 2021, Sec. 4: L^2 (Ckk + out) < L Ckk out).
  // MNIST CNN conv2 (L = 25, Ckk = 256, out = 32) at B = 256: 8 MiB, materialised (ghost
  // norms + second product: 2.6 + 1.3 ms on one thread, materialised 1.7 + 0.3 + 0.5 ms).
  const int64_t positions = capture_.backprop.size(2) * capture_.backprop.size(3);
  const int64_t ckk = options_.in_channels * options_.kernel_size[0] * options_.kernel_size[1];
  const int64_t buffer_bytes = capture_.backprop.size(0) * options_.out_channels * ckk *
                               capture_.backprop.element_size();
  return buffer_bytes > kMaxPerExampleBufferBytes &&
         positions * (ckk + options_.out_channels) < ckk * options_.out_channels;
}

void DpConv2dImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  const torch::Tensor& a = capture_.activation;
  const int64_t batch = a.size(0);
  torch::Tensor g = capture_.backprop.reshape({batch, options_.out_channels, -1});  // (B,out,L)
  const int64_t ckk = options_.in_channels * options_.kernel_size[0] * options_.kernel_size[1];
  const bool ghost = UseGhost();
  per_example_valid_ = false;
  // Chunks of examples (UnfoldChunk) spread over LibTorch's threads (LibTorch multiplies a
  // batch one example after another on one thread, see ParallelBmmOut), each writing its
  // own rows of `norms` and of the per-example buffer.
  torch::Tensor norms = torch::empty({batch}, a.options().dtype(torch::kFloat64));
  torch::Tensor per;
  if (!ghost) {
    per = PerExampleBuffer(&per_example_, a.options(), {batch, options_.out_channels, ckk});
  }
  ForEachChunkInParallel(batch, UnfoldChunk(), a.is_cpu(),
                         [&](int64_t /*part*/, int64_t start, int64_t len) {
    torch::Tensor u = UnfoldRows(a.narrow(0, start, len));  // (len, L, Ckk)
    torch::Tensor gc = g.narrow(0, start, len);             // (len, out, L)
    if (ghost) {
      // Li et al. 2021, eq. (4) with positions L: <U U^T, G^T G>_F.
      torch::Tensor uu = Bmm(u, u.transpose(1, 2));
      torch::Tensor gg = Bmm(gc.transpose(1, 2), gc);
      norms.narrow(0, start, len).copy_(BatchedFrobeniusInner(uu, gg));
    } else {
      torch::Tensor part = per.narrow(0, start, len);
      BmmOut(part, gc, u);  // G_i U_i: (out, L) x (L, Ckk)
      norms.narrow(0, start, len).copy_(SquaredNorms(part));  // while the chunk is in cache
    }
  });
  per_example_valid_ = !ghost;
  out->push_back(norms);
  if (options_.bias) out->push_back(SquaredNorms(g.sum(2)));
}

std::vector<torch::Tensor> DpConv2dImpl::PerExampleGradients() {
  CheckCapture(*this);
  torch::Tensor u = UnfoldedRows();  // (B, L, Ckk)
  int64_t batch = u.size(0);
  torch::Tensor g = capture_.backprop.reshape({batch, options_.out_channels, -1});
  std::vector<int64_t> shape = weight.sizes().vec();
  shape.insert(shape.begin(), batch);
  if (!options_.bias) return {torch::bmm(g, u).view(shape)};
  return {torch::bmm(g, u).view(shape), g.sum(2)};
}

void DpConv2dImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  per_example_valid_ = false;
  torch::Tensor u = UnfoldedRows();  // (B, L, Ckk)
  const int64_t batch = u.size(0), m = microbatches.size(0);
  torch::Tensor g = capture_.backprop.reshape({batch, options_.out_channels, -1});  // (B,out,L)
  // Positions of a microbatch = the output positions of all its examples.
  torch::Tensor a = GroupRows(u, microbatches).reshape({m, -1, u.size(2)});
  torch::Tensor gm =
      GroupRows(g.transpose(1, 2), microbatches).reshape({m, -1, options_.out_channels});
  out->push_back(PositionSquaredNorms(a, gm, method_));
  if (options_.bias) out->push_back(SquaredNorms(GroupRows(g.sum(2), microbatches).sum(1)));
}

void DpConv2dImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                         std::vector<torch::Tensor>* sums) {
  CheckCapture(*this);
  const size_t n = options_.bias ? 2 : 1;
  TORCH_CHECK(scales.size() == n && sums->size() == n, Describe(), ": expected ", n,
              " scale vectors and ", n, " sums");
  const torch::Tensor& a = capture_.activation;
  const int64_t batch = a.size(0), out_channels = options_.out_channels;
  const int64_t ckk = weight.numel() / out_channels;
  torch::Tensor g = capture_.backprop.reshape({batch, out_channels, -1});  // (B, out, L)
  if (per_example_valid_) {
    AddWeightedSum(scales[0], per_example_, &(*sums)[0]);
  } else {
    // sum_i s_i G_i U_i (U_i the (L, Ckk) im2row of example i) is one product over all
    // positions of the batch: [s_i G_i^T]_i^T (out x B L) times [U_i]_i (B L x Ckk). Per
    // chunk of examples (im2row again, as for the norms, instead of keeping the batch's
    // rows), each part of the batch (one per thread) into its own partial sum. Replaces
    // LibTorch's weight-gradient convolution of the rescaled backprop, which runs its
    // im2col serially (MNIST CNN conv2, 256 examples, 2 threads: 1.1 ms before).
    const int64_t parts = ParallelParts(batch, a.is_cpu());
    torch::Tensor s0 = scales[0].to(g.scalar_type());
    torch::Tensor partial = torch::zeros({parts, out_channels, ckk}, g.options());
    ForEachChunkInParallel(batch, UnfoldChunk(), a.is_cpu(),
                           [&](int64_t part, int64_t start, int64_t len) {
      torch::Tensor u = UnfoldRows(a.narrow(0, start, len)).reshape({-1, ckk});  // (len L, Ckk)
      torch::Tensor gs = (g.narrow(0, start, len) * s0.narrow(0, start, len).view({len, 1, 1}))
                             .transpose(1, 2)
                             .reshape({-1, out_channels});  // (len L, out)
      partial.select(0, part).addmm_(gs.t(), u);
    });
    (*sums)[0].add_(partial.sum(0).view_as((*sums)[0]));
  }
  if (options_.bias) (*sums)[1].addmv_(g.sum(2).t(), scales[1].to(g.scalar_type()));
}

void DpConv2dImpl::ClearCapture() {
  capture_.Clear();
  unfolded_ = torch::Tensor();
  per_example_ = torch::Tensor();
  per_example_valid_ = false;
}

std::string DpConv2dImpl::Describe() const {
  return absl::StrCat("DpConv2d(", options_.in_channels, ", ", options_.out_channels,
                      ", kernel ", options_.kernel_size[0], "x", options_.kernel_size[1],
                      ", stride ", options_.stride[0], ")");
}

}  // namespace dpkit::optim
