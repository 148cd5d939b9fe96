#include "optim/torch/per_example_layers.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dpkit::optim {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The capture travels through the autograd context as an integer: the layer owns it
// and outlives its own backward pass.
int64_t ToHandle(LayerCapture* capture) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(capture));
}
LayerCapture* FromHandle(AutogradContext* ctx) {
  return reinterpret_cast<LayerCapture*>(
      static_cast<intptr_t>(ctx->saved_data["capture"].toInt()));
}

// z = a W^T + b. Backward returns dL/da only; the weight gradient is assembled later from
// the capture with per-example clip factors.
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t handle) {
    ctx->saved_data["capture"] = handle;
    ctx->save_for_backward({weight});
    reinterpret_cast<LayerCapture*>(static_cast<intptr_t>(handle))->activation =
        input.detach();
    return torch::addmm(bias, input.reshape({-1, input.size(-1)}), weight.t())
        .view([&] {
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

struct Conv2dFunction : public torch::autograd::Function<Conv2dFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t handle, std::vector<int64_t> stride,
                               std::vector<int64_t> padding, std::vector<int64_t> dilation) {
    ctx->saved_data["capture"] = handle;
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->save_for_backward({input, weight});
    reinterpret_cast<LayerCapture*>(static_cast<intptr_t>(handle))->activation =
        input.detach();
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

struct EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& indices,
                               const torch::Tensor& weight, int64_t handle) {
    ctx->saved_data["capture"] = handle;
    reinterpret_cast<LayerCapture*>(static_cast<intptr_t>(handle))->activation = indices;
    return torch::embedding(weight, indices);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    FromHandle(ctx)->backprop = grad_outputs[0];
    return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// y = x_hat * w + b with w, b already shaped to broadcast against x_hat.
struct AffineFunction : public torch::autograd::Function<AffineFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& normalized,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t handle) {
    ctx->saved_data["capture"] = handle;
    ctx->save_for_backward({weight});
    reinterpret_cast<LayerCapture*>(static_cast<intptr_t>(handle))->activation =
        normalized.detach();
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

// sum_k x_k^2 with each square and the sum in float64: the square of a float is exact in
// double, and the sum loses about n 2^-53 relative. `omp simd` allows the reduction to be
// reordered into vector lanes (this target compiles with -fopenmp); target_clones adds an
// AVX2 version chosen at load time on CPUs that have it (MNIST CNN conv2's 2.1 M
// per-example gradient entries, one thread: 0.19 instead of 0.37 ms).
template <typename T>
[[gnu::always_inline]] inline double SumOfSquaresImpl(const T* x, int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t k = 0; k < n; ++k) {
    const double v = static_cast<double>(x[k]);
    sum += v * v;
  }
  return sum;
}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DPKIT_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DPKIT_AVX2_CLONES
#endif
DPKIT_AVX2_CLONES double SumOfSquares(const float* x, int64_t n) { return SumOfSquaresImpl(x, n); }
DPKIT_AVX2_CLONES double SumOfSquares(const double* x, int64_t n) { return SumOfSquaresImpl(x, n); }
#undef DPKIT_AVX2_CLONES

// Per-example squared L2 norms of per_example (B, ...), float64 (B). On the CPU one pass
// over the data; LibTorch's to(float64).pow(2).sum(1) writes two float64 copies first
// (MNIST CNN conv2's 256 x 8192 per-example gradients, one thread: 2.7 against 0.2 ms).
torch::Tensor SquaredNorms(const torch::Tensor& per_example) {
  const int64_t batch = per_example.size(0);
  if (per_example.is_cpu() && (per_example.scalar_type() == torch::kFloat32 ||
                               per_example.scalar_type() == torch::kFloat64)) {
    torch::Tensor x = per_example.reshape({batch, -1}).contiguous();
    torch::Tensor norms = torch::empty({batch}, x.options().dtype(torch::kFloat64));
    const int64_t n = x.size(1);
    double* out = norms.data_ptr<double>();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "SquaredNorms", [&] {
      const scalar_t* data = x.data_ptr<scalar_t>();
      for (int64_t i = 0; i < batch; ++i) out[i] = SumOfSquares(data + i * n, n);
    });
    return norms;
  }
  return per_example.reshape({batch, -1}).to(torch::kFloat64).pow(2).sum(1);
}

// oneDNN's row-major single-precision GEMM (dnnl.h: dnnl_sgemm(transa, transb, M, N, K,
// alpha, A, lda, B, ldb, beta, C, ldc), dnnl_dim_t = int64_t, returns dnnl_success = 0).
// LibTorch's CPU build loads oneDNN for its convolutions; its sgemm uses JIT kernels for the
// machine's widest vector unit, where Debian's OpenBLAS 0.3.21 falls back to AVX2 kernels
// on newer CPUs. Looked up at run time (like OpenBLAS's controls in cpu_threads.cc), so
// nothing links oneDNN and a LibTorch without it falls back to at::bmm_out.
using DnnlSgemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*,
                            int64_t, const float*, int64_t, float, float*, int64_t);
DnnlSgemmFn DnnlSgemm() {
  static const DnnlSgemmFn sgemm =
      reinterpret_cast<DnnlSgemmFn>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return sgemm;
}

// The row-major layout of the (rows x cols) matrices of t (b, rows, cols) for a GEMM:
// 'N' with leading dimension stride(1), or 'T' (stored transposed) with stride(2).
bool GemmLayout(const torch::Tensor& t, char* trans, int64_t* ld) {
  const int64_t rows = t.size(1), cols = t.size(2);
  if (t.stride(2) == 1 && t.stride(1) >= std::max<int64_t>(1, cols)) {
    *trans = 'N';
    *ld = t.stride(1);
    return true;
  }
  if (t.stride(1) == 1 && t.stride(2) >= std::max<int64_t>(1, rows)) {
    *trans = 'T';
    *ld = t.stride(2);
    return true;
  }
  return false;
}

// out_i = x_i y_i for x (b, m, k), y (b, k, n), out (b, m, n); one GEMM per item on the
// calling thread. CPU float32 goes through oneDNN's sgemm (MNIST CNN per-example products,
// 256 examples, one thread: conv1 0.6 instead of 1.7 ms, conv2 0.6 instead of 1.4 ms with
// at::bmm_out); other types and devices, or layouts sgemm cannot take, through at::bmm_out.
void BmmOut(torch::Tensor out, const torch::Tensor& x, const torch::Tensor& y) {
  const DnnlSgemmFn sgemm = DnnlSgemm();
  char ta = 'N', tb = 'N', tc = 'N';
  int64_t lda = 0, ldb = 0, ldc = 0;
  const int64_t batch = x.size(0), m = x.size(1), k = x.size(2), n = y.size(2);
  if (sgemm != nullptr && out.is_cpu() && x.is_cpu() && y.is_cpu() &&
      out.scalar_type() == torch::kFloat32 && x.scalar_type() == torch::kFloat32 &&
      y.scalar_type() == torch::kFloat32 && m > 0 && n > 0 && k > 0 &&
      GemmLayout(x, &ta, &lda) && GemmLayout(y, &tb, &ldb) && GemmLayout(out, &tc, &ldc) &&
      tc == 'N') {
    const float* xp = x.data_ptr<float>();
    const float* yp = y.data_ptr<float>();
    float* op = out.data_ptr<float>();
    bool ok = true;
    for (int64_t i = 0; i < batch && ok; ++i) {
      ok = sgemm(ta, tb, m, n, k, 1.0f, xp + i * x.stride(0), lda, yp + i * y.stride(0), ldb,
                 0.0f, op + i * out.stride(0), ldc) == 0;
    }
    if (ok) return;
  }
  at::bmm_out(out, x, y);
}

torch::Tensor Bmm(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor out = torch::empty({x.size(0), x.size(1), y.size(2)}, x.options());
  BmmOut(out, x, y);
  return out;
}

// Batched matrix products split across LibTorch's intra-op threads. CPU builds of LibTorch
// without MKL (Debian's) compute bmm as a SERIAL loop of one small GEMM per batch item
// (aten/src/ATen/native/LinearAlgebra.cpp, bmm_out_or_baddbmm_: the batch is split over
// threads only on mobile builds), so every per-example product would run on one thread
// while the rest of a training step uses all of them. Here each thread takes a contiguous
// range of examples; inside a parallel region LibTorch's own ops run single-threaded in
// the calling thread, so nothing is oversubscribed. Small products stay serial.
constexpr int64_t kParallelMinMultiplyAdds = int64_t{1} << 16;

void ParallelBmmOut(torch::Tensor out, const torch::Tensor& x, const torch::Tensor& y) {
  if (!out.is_cpu()) {  // one batched kernel on accelerators
    at::bmm_out(out, x, y);
    return;
  }
  const int64_t batch = x.size(0);
  const int64_t work = x.size(1) * x.size(2) * y.size(2);  // multiply-adds per item
  const int64_t grain = std::max<int64_t>(1, kParallelMinMultiplyAdds / std::max<int64_t>(1, work));
  at::parallel_for(0, batch, grain, [&](int64_t begin, int64_t end) {
    torch::NoGradGuard no_grad;  // grad mode is thread-local; worker threads default to on
    BmmOut(out.narrow(0, begin, end - begin), x.narrow(0, begin, end - begin),
           y.narrow(0, begin, end - begin));
  });
}

torch::Tensor ParallelBmm(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor out = torch::empty({x.size(0), x.size(1), y.size(2)}, x.options());
  ParallelBmmOut(out, x, y);
  return out;
}

// How many parts ForEachChunkInParallel splits n items into: LibTorch's intra-op threads
// (at most n) for CPU tensors outside a parallel region, else 1.
int64_t ParallelParts(int64_t n, bool cpu) {
  if (!cpu || at::in_parallel_region()) return 1;
  return std::max<int64_t>(1, std::min<int64_t>(n, at::get_num_threads()));
}

// Splits [0, n) into ParallelParts(n, cpu) contiguous parts of equal size (+-1), runs the
// parts on LibTorch's intra-op threads (CPU tensors; otherwise one after another on the
// calling thread) and, within part p, calls fn(p, start, length) for consecutive chunks of
// at most `max_chunk` items of equal size (+-1). A part runs on one thread, so fn may
// accumulate into a per-part buffer without locks; which thread runs it does not matter.
template <typename Fn>
void ForEachChunkInParallel(int64_t n, int64_t max_chunk, bool cpu, const Fn& fn) {
  if (n <= 0) return;
  const int64_t parts = ParallelParts(n, cpu);
  auto run_part = [&](int64_t p) {
    torch::NoGradGuard no_grad;  // grad mode is thread-local; worker threads default to on
    const int64_t begin = p * n / parts, end = (p + 1) * n / parts, items = end - begin;
    const int64_t chunks = (items + max_chunk - 1) / max_chunk;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t start = begin + c * items / chunks;
      fn(p, start, begin + (c + 1) * items / chunks - start);
    }
  };
  if (parts == 1) {
    run_part(0);
    return;
  }
  at::parallel_for(0, parts, 1, [&](int64_t first, int64_t last) {
    for (int64_t p = first; p < last; ++p) run_part(p);
  });
}

// The per-example gradient buffer of a layer, (B, out, in), held from the norms to the
// clipped sum of a physical batch and released by ClearCapture (DpOptimizer calls it right
// after the sum), so it never coexists with the next forward pass's activations: a buffer
// kept across steps would add its size to the step's peak (which is in the forward and
// backward). ConfigureCpuThreads (cpu_threads.h) keeps freed heap memory in the process,
// so the next step's buffer reuses the same memory without page faults.
torch::Tensor PerExampleBuffer(torch::Tensor* buffer, const torch::TensorOptions& options,
                               const std::vector<int64_t>& shape) {
  if (!buffer->defined() || buffer->sizes() != c10::IntArrayRef(shape) ||
      buffer->scalar_type() != options.dtype().toScalarType() ||
      buffer->device() != options.device()) {
    *buffer = torch::empty(shape, options);
  }
  return *buffer;
}

// The rows of x (B, ...) of each microbatch: (M, n_max, ...), where `microbatches` (M,
// n_max) holds batch indices and B marks padding, which reads a zero row.
torch::Tensor GroupRows(const torch::Tensor& x, const torch::Tensor& microbatches) {
  std::vector<int64_t> pad = x.sizes().vec();
  pad[0] = 1;
  torch::Tensor padded = torch::cat({x, torch::zeros(pad, x.options())});
  torch::Tensor rows = padded.index_select(0, microbatches.flatten().to(x.device()));
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = microbatches.size(1);
  shape.insert(shape.begin(), microbatches.size(0));
  return rows.view(shape);
}

// <X_i, Y_i>_F for each i of (B, n, n) Gram temporaries: X is overwritten (no third
// buffer) and the sum accumulates in float64 without a float64 copy.
torch::Tensor BatchedFrobeniusInner(torch::Tensor x, const torch::Tensor& y) {
  return x.mul_(y).sum({1, 2}, /*keepdim=*/false, torch::kFloat64);
}

// ||G_m^T A_m||_F^2 for a (M, P, d) and g (M, P, p): by the ghost identity
// <A A^T, G G^T>_F (Li et al. 2021, eq. (4)) when `method` says so or, for kAuto, when
// P^2 (d + p) < P d p; else from the product itself.
torch::Tensor PositionSquaredNorms(const torch::Tensor& a, const torch::Tensor& g,
                                   NormMethod method) {
  const int64_t positions = a.size(1), d = a.size(2), p = g.size(2);
  const bool ghost = method == NormMethod::kAuto ? positions * (d + p) < d * p
                                                 : method == NormMethod::kGhost;
  if (ghost) {
    torch::Tensor aa = ParallelBmm(a, a.transpose(1, 2));
    torch::Tensor gg = ParallelBmm(g, g.transpose(1, 2));
    return BatchedFrobeniusInner(aa, gg);
  }
  return SquaredNorms(ParallelBmm(g.transpose(1, 2), a));
}

// sums[p] += sum_i scale_i * per_example_i for per_example (B, *shape), in place: the
// matrix-vector product P^T s of P (B x n), as a GEMV (one pass over P; as a (1 x B) by
// (B x n) GEMM, OpenBLAS first packs all of P), its n entries split across LibTorch's
// threads (OpenBLAS runs one thread per call, cpu_threads.h) when P is large.
void AddWeightedSum(const torch::Tensor& scale, const torch::Tensor& per_example,
                    torch::Tensor* sum) {
  const int64_t batch = per_example.size(0);
  torch::Tensor s = scale.to(per_example.scalar_type());
  torch::Tensor p = per_example.reshape({batch, -1});
  torch::Tensor out = sum->view({-1});
  const int64_t n = p.size(1);
  // Memory-bound: below ~1 M elements a second thread costs more than it saves (MNIST CNN,
  // 2 threads: conv1's 256 x 1024 0.1 ms serial; conv2's 256 x 8192 0.2 ms, split or not).
  constexpr int64_t kParallelMinElements = int64_t{1} << 20;
  const int64_t parts = batch * n >= kParallelMinElements ? ParallelParts(n, p.is_cpu()) : 1;
  if (parts == 1) {
    out.addmv_(p.t(), s);
    return;
  }
  at::parallel_for(0, parts, 1, [&](int64_t first, int64_t last) {
    torch::NoGradGuard no_grad;
    for (int64_t t = first; t < last; ++t) {
      const int64_t begin = t * n / parts, end = (t + 1) * n / parts;
      out.narrow(0, begin, end - begin).addmv_(p.narrow(1, begin, end - begin).t(), s);
    }
  });
}

void CheckCapture(const PerExampleLayer& layer) {
  TORCH_CHECK(layer.HasCapture(), layer.Describe(),
              ": no captured forward/backward pass (run forward with autograd enabled, "
              "then backward of the summed loss)");
}

}  // namespace

std::vector<torch::Tensor> PerExampleLayer::ScaledGradientSums(
    const std::vector<torch::Tensor>& scales) {
  std::vector<torch::Tensor> sums;
  for (const torch::Tensor& p : DpParameters()) {
    sums.push_back(torch::zeros(p.sizes(), p.options().requires_grad(false)));
  }
  AddScaledGradientSums(scales, &sums);
  return sums;
}

// ----------------------------------------------------------------------------- Linear
DpLinearImpl::DpLinearImpl(int64_t in_features, int64_t out_features)
    : in_features_(in_features), out_features_(out_features) {
  TORCH_CHECK(in_features > 0 && out_features > 0, "DpLinear: sizes must be > 0");
  double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight",
                              torch::empty({out_features, in_features}).uniform_(-bound, bound));
  bias = register_parameter("bias", torch::empty({out_features}).uniform_(-bound, bound));
}

torch::Tensor DpLinearImpl::forward(const torch::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2 && input.size(-1) == in_features_, Describe(),
              ": input must be (B, ..., ", in_features_, "), got ", input.sizes());
  ClearCapture();
  if (!torch::GradMode::is_enabled()) return torch::nn::functional::linear(input, weight, bias);
  return LinearFunction::apply(input, weight, bias, ToHandle(&capture_));
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
    per_example_valid_ = true;
    out->push_back(SquaredNorms(per));
  }
  out->push_back(SquaredNorms(g.sum(1)));
}

std::vector<torch::Tensor> DpLinearImpl::PerExampleGradients() {
  CheckCapture(*this);
  torch::Tensor a = A(), g = G();
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
  out->push_back(SquaredNorms(g.sum(1)));
}

void DpLinearImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                         std::vector<torch::Tensor>* sums) {
  CheckCapture(*this);
  TORCH_CHECK(scales.size() == 2 && sums->size() == 2, Describe(),
              ": expected 2 scale vectors and 2 sums");
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
  (*sums)[1].addmv_(g.sum(1).t(), scales[1].to(g.scalar_type()));
}

void DpLinearImpl::ClearCapture() {
  capture_.Clear();
  per_example_ = torch::Tensor();
  per_example_valid_ = false;
}

std::string DpLinearImpl::Describe() const {
  return absl::StrCat("DpLinear(", in_features_, ", ", out_features_, ")");
}

// ----------------------------------------------------------------------------- Conv2d
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
  bias = register_parameter("bias",
                            torch::empty({options.out_channels}).uniform_(-bound, bound));
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
  return Conv2dFunction::apply(input, weight, bias, ToHandle(&capture_), stride, padding,
                               dilation);
}

int64_t DpConv2dImpl::CapturedBatchSize() const { return capture_.activation.size(0); }

// im2row: (b, C, H, W) -> (b, Ho*Wo, C*kh*kw). Row (y, x) of an example holds the receptive
// field of output position (y, x): element (c, i, j) = input[c, y*sh + i*dh - ph,
// x*sw + j*dw - pw] (zero outside the input), so each example's block is the transpose of
// torch::nn::functional::unfold's (C*kh*kw, L) im2col, and the rows of a batch stack into
// one (b*L, C*kh*kw) matrix (AddScaledGradientSums multiplies it as one GEMM). Each example
// is copied into a zero-padded scratch first, so the gather has no bounds checks, and one
// kernel row (j = 0..kw-1) at dilation 1 is a run of kw consecutive inputs, copied with a
// compile-time length for the common widths. Debian's LibTorch 1.13 CPU im2col
// (im2col_out_cpu) bounds-checks and indexes every element, one example after another
// (MNIST CNN conv1, 256 examples, one thread: 4.0 ms); a strided im2col with per-row
// bounds took 1.6 ms (conv2 1.0 ms), this im2row 0.2 ms (conv2 0.2 ms).
template <typename T, int kKernelWidth>
void Im2RowExample(const T* padded, int64_t channels, int64_t padded_h, int64_t padded_w,
                   const DpConv2dOptions& o, int64_t out_h, int64_t out_w, T* out) {
  const int64_t kh = o.kernel_size[0];
  const int64_t kw = kKernelWidth > 0 ? kKernelWidth : o.kernel_size[1];
  const int64_t sh = o.stride[0], sw = o.stride[1], dh = o.dilation[0], dw = o.dilation[1];
  for (int64_t y = 0; y < out_h; ++y) {
    for (int64_t x = 0; x < out_w; ++x) {
      const T* corner = padded + y * sh * padded_w + x * sw;
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = corner + c * padded_h * padded_w;
        for (int64_t i = 0; i < kh; ++i, out += kw) {
          const T* src = plane + i * dh * padded_w;
          if constexpr (kKernelWidth > 0) {
            // Dilation 1 (see the dispatch): one fixed-size copy, which compiles to a few
            // vector moves (an element loop here ran 2.5x slower).
            std::memcpy(out, src, kKernelWidth * sizeof(T));
          } else {
            for (int64_t j = 0; j < kw; ++j) out[j] = src[j * dw];
          }
        }
      }
    }
  }
}

template <typename T>
void Im2Row(const T* input, int64_t batch, int64_t channels, int64_t height, int64_t width,
            const DpConv2dOptions& o, int64_t out_h, int64_t out_w, T* out) {
  const int64_t ph = o.padding[0], pw = o.padding[1];
  const int64_t padded_h = height + 2 * ph, padded_w = width + 2 * pw;
  const int64_t row_length = channels * o.kernel_size[0] * o.kernel_size[1];
  // Reads stay inside the padded example: the largest row read is
  // (out_h - 1) sh + (kh - 1) dh <= height + 2 ph - 1 by the definition of out_h (columns
  // alike). The zero border is written once; each example overwrites only the interior.
  std::vector<T> scratch;
  if (ph > 0 || pw > 0) scratch.assign(channels * padded_h * padded_w, T(0));
  void (*kernel)(const T*, int64_t, int64_t, int64_t, const DpConv2dOptions&, int64_t,
                 int64_t, T*) = &Im2RowExample<T, 0>;
  if (o.dilation[1] == 1) {
    switch (o.kernel_size[1]) {
      case 2: kernel = &Im2RowExample<T, 2>; break;
      case 3: kernel = &Im2RowExample<T, 3>; break;
      case 4: kernel = &Im2RowExample<T, 4>; break;
      case 5: kernel = &Im2RowExample<T, 5>; break;
      case 7: kernel = &Im2RowExample<T, 7>; break;
      case 8: kernel = &Im2RowExample<T, 8>; break;
      default: break;
    }
  }
  for (int64_t n = 0; n < batch; ++n) {
    const T* example = input + n * channels * height * width;
    const T* padded = example;
    if (!scratch.empty()) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t r = 0; r < height; ++r) {
          std::copy_n(example + (c * height + r) * width, width,
                      scratch.data() + (c * padded_h + r + ph) * padded_w + pw);
        }
      }
      padded = scratch.data();
    }
    kernel(padded, channels, padded_h, padded_w, o, out_h, out_w,
           out + n * out_h * out_w * row_length);
  }
}

torch::Tensor DpConv2dImpl::UnfoldRows(const torch::Tensor& input) const {
  const DpConv2dOptions& o = options_;
  const int64_t out_h =
      (input.size(2) + 2 * o.padding[0] - o.dilation[0] * (o.kernel_size[0] - 1) - 1) / o.stride[0] + 1;
  const int64_t out_w =
      (input.size(3) + 2 * o.padding[1] - o.dilation[1] * (o.kernel_size[1] - 1) - 1) / o.stride[1] + 1;
  TORCH_CHECK(out_h > 0 && out_w > 0, Describe(), ": input ", input.sizes(),
              " is smaller than the kernel");
  const int64_t row_length = input.size(1) * o.kernel_size[0] * o.kernel_size[1];
  if (input.is_cpu() && (input.scalar_type() == torch::kFloat32 ||
                         input.scalar_type() == torch::kFloat64)) {
    torch::Tensor in = input.contiguous();
    torch::Tensor out = torch::empty({in.size(0), out_h * out_w, row_length}, in.options());
    AT_DISPATCH_FLOATING_TYPES(in.scalar_type(), "DpConv2d::UnfoldRows", [&] {
      Im2Row(in.data_ptr<scalar_t>(), in.size(0), in.size(1), in.size(2), in.size(3), o, out_h,
             out_w, out.data_ptr<scalar_t>());
    });
    return out;
  }
  // Other devices and types: LibTorch's own im2col, transposed (a view).
  namespace F = torch::nn::functional;
  return F::unfold(input, F::UnfoldFuncOptions({o.kernel_size[0], o.kernel_size[1]})
                              .dilation({o.dilation[0], o.dilation[1]})
                              .padding({o.padding[0], o.padding[1]})
                              .stride({o.stride[0], o.stride[1]}))
      .transpose(1, 2);
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
  out->push_back(SquaredNorms(g.sum(2)));
}

std::vector<torch::Tensor> DpConv2dImpl::PerExampleGradients() {
  CheckCapture(*this);
  torch::Tensor u = UnfoldedRows();  // (B, L, Ckk)
  int64_t batch = u.size(0);
  torch::Tensor g = capture_.backprop.reshape({batch, options_.out_channels, -1});
  std::vector<int64_t> shape = weight.sizes().vec();
  shape.insert(shape.begin(), batch);
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
  out->push_back(SquaredNorms(GroupRows(g.sum(2), microbatches).sum(1)));
}

void DpConv2dImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                         std::vector<torch::Tensor>* sums) {
  CheckCapture(*this);
  TORCH_CHECK(scales.size() == 2 && sums->size() == 2, Describe(),
              ": expected 2 scale vectors and 2 sums");
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
  (*sums)[1].addmv_(g.sum(2).t(), scales[1].to(g.scalar_type()));
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

// -------------------------------------------------------------------------- Embedding
DpEmbeddingImpl::DpEmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  TORCH_CHECK(num_embeddings > 0 && embedding_dim > 0, "DpEmbedding: sizes must be > 0");
  weight = register_parameter("weight", torch::randn({num_embeddings, embedding_dim}));
}

torch::Tensor DpEmbeddingImpl::forward(const torch::Tensor& indices) {
  TORCH_CHECK(indices.dim() >= 1 && indices.scalar_type() == torch::kLong, Describe(),
              ": input must be int64 indices of shape (B, ...)");
  ClearCapture();
  if (!torch::GradMode::is_enabled()) return torch::embedding(weight, indices);
  return EmbeddingFunction::apply(indices, weight, ToHandle(&capture_));
}

int64_t DpEmbeddingImpl::CapturedBatchSize() const { return capture_.activation.size(0); }

void DpEmbeddingImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  int64_t batch = capture_.activation.size(0);
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor g = capture_.backprop.reshape({batch, -1, embedding_dim_});
  if (idx.size(1) == 1) {
    out->push_back(g.to(torch::kFloat64).pow(2).sum({1, 2}));
    return;
  }
  // Rows used at positions t and s coincide iff x_t = x_s: sum [x_t = x_s] <g_t, g_s>.
  torch::Tensor same = idx.unsqueeze(2).eq(idx.unsqueeze(1)).to(g.scalar_type());
  torch::Tensor gg = ParallelBmm(g, g.transpose(1, 2));
  out->push_back(BatchedFrobeniusInner(same, gg));
}

std::vector<torch::Tensor> DpEmbeddingImpl::PerExampleGradients() {
  CheckCapture(*this);
  int64_t batch = capture_.activation.size(0);
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor g = capture_.backprop.reshape({-1, embedding_dim_});
  torch::Tensor rows =
      (idx + torch::arange(batch, idx.options()).view({batch, 1}) * num_embeddings_).flatten();
  return {torch::zeros({batch * num_embeddings_, embedding_dim_}, g.options())
              .index_add_(0, rows, g)
              .view({batch, num_embeddings_, embedding_dim_})};
}

void DpEmbeddingImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                   std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  const int64_t batch = capture_.activation.size(0), m = microbatches.size(0);
  const torch::Device device = capture_.backprop.device();
  // A microbatch's gradient has one non-zero row per distinct index it uses, the sum of
  // the backprops at those positions: ||sum_i G_i||^2 = sum_{(j, row)} ||sum_t g_t||^2.
  // Summing rows per (microbatch, index) key costs O(positions * dim) memory, where the
  // Gram form of Li et al. 2021, Sec. 4.2, would need (n T)^2 per microbatch.
  torch::Tensor members = microbatches.flatten().to(device);
  torch::Tensor owner = torch::arange(m, members.options()).repeat_interleave(microbatches.size(1));
  torch::Tensor real = members.lt(batch);
  torch::Tensor microbatch_of_example = torch::zeros({batch}, members.options())
                                            .index_put_({members.index({real})}, owner.index({real}));
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor key = (microbatch_of_example.view({batch, 1}) * num_embeddings_ + idx).flatten();
  auto [unique_keys, inverse] = torch::_unique(key, /*sorted=*/false, /*return_inverse=*/true);
  torch::Tensor g = capture_.backprop.reshape({-1, embedding_dim_});
  torch::Tensor rows = torch::zeros({unique_keys.size(0), embedding_dim_}, g.options())
                           .index_add_(0, inverse.flatten(), g);
  out->push_back(torch::zeros({m}, rows.options().dtype(torch::kFloat64))
                     .index_add_(0, unique_keys.div(num_embeddings_, "floor"),
                                 rows.to(torch::kFloat64).pow(2).sum(1)));
}

void DpEmbeddingImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                            std::vector<torch::Tensor>* sums) {
  CheckCapture(*this);
  TORCH_CHECK(scales.size() == 1 && sums->size() == 1, Describe(),
              ": expected 1 scale vector and 1 sum");
  int64_t batch = capture_.activation.size(0);
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor g = capture_.backprop.reshape({batch, -1, embedding_dim_});
  torch::Tensor gs = g * scales[0].to(g.scalar_type()).view({batch, 1, 1});
  // Only the rows used by the batch are touched; no table-sized temporary.
  (*sums)[0].index_add_(0, idx.flatten(), gs.reshape({-1, embedding_dim_}));
}

std::string DpEmbeddingImpl::Describe() const {
  return absl::StrCat("DpEmbedding(", num_embeddings_, ", ", embedding_dim_, ")");
}

// -------------------------------------------------------------------------- GroupNorm
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
  for (const torch::Tensor& per : PerExampleGradients()) out->push_back(SquaredNorms(per));
}

void DpGroupNormImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                std::vector<torch::Tensor>* out) {
  for (const torch::Tensor& per : PerExampleGradients()) {
    out->push_back(SquaredNorms(GroupRows(per, microbatches).sum(1)));
  }
}

void DpGroupNormImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                         std::vector<torch::Tensor>* sums) {
  TORCH_CHECK(scales.size() == 2 && sums->size() == 2, Describe(),
              ": expected 2 scale vectors and 2 sums");
  std::vector<torch::Tensor> per = PerExampleGradients();
  for (size_t k = 0; k < 2; ++k) AddWeightedSum(scales[k], per[k], &(*sums)[k]);
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
  for (const torch::Tensor& per : PerExampleGradients()) out->push_back(SquaredNorms(per));
}

void DpLayerNormImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                std::vector<torch::Tensor>* out) {
  for (const torch::Tensor& per : PerExampleGradients()) {
    out->push_back(SquaredNorms(GroupRows(per, microbatches).sum(1)));
  }
}

void DpLayerNormImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                         std::vector<torch::Tensor>* sums) {
  TORCH_CHECK(scales.size() == 2 && sums->size() == 2, Describe(),
              ": expected 2 scale vectors and 2 sums");
  std::vector<torch::Tensor> per = PerExampleGradients();
  for (size_t k = 0; k < 2; ++k) AddWeightedSum(scales[k], per[k], &(*sums)[k]);
}

std::string DpLayerNormImpl::Describe() const {
  return absl::StrCat("DpLayerNorm([", absl::StrJoin(normalized_shape_, ", "), "])");
}

// ------------------------------------------------------------------------- Validation
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
          "DpLinear, DpConv2d, DpEmbedding, DpGroupNorm, DpLayerNorm (with any "
          "parameter-free activations and pooling between them)"));
    }
  }
  if (layers->empty()) {
    return absl::InvalidArgumentError("model has no trainable per-example layers");
  }
  return absl::OkStatus();
}

}  // namespace dpkit::optim
