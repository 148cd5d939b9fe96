// Kernels shared by the per-example layer rules (dp_linear, dp_conv2d, dp_embedding,
// dp_affine_norm): squared norms, batched products (oneDNN's sgemm with an at::bmm_out
// fallback, split over LibTorch's threads), im2row, thread chunks, and the pieces of the
// ghost-norm identity. Internal to optim/torch (BUILD visibility); users include
// per_example_layers.h.
//
// Everything here runs per layer and physical batch, not per element: the inner loops
// (SumOfSquares, the im2row copies, the GEMMs) live inside these functions, so a call from
// a layer's translation unit costs one call per batch or per chunk of examples.
// ForEachChunkInParallel is a template, compiled (with its OpenMP pragma, hence -fopenmp)
// in the caller.
#ifndef DPKIT_OPTIM_TORCH_PER_EXAMPLE_KERNELS_H_
#define DPKIT_OPTIM_TORCH_PER_EXAMPLE_KERNELS_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim::per_example_internal {

// The capture travels through the autograd context as an integer: the layer owns it and
// outlives its own backward pass.
inline int64_t ToHandle(LayerCapture* capture) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(capture));
}
inline LayerCapture* FromHandle(int64_t handle) {
  return reinterpret_cast<LayerCapture*>(static_cast<intptr_t>(handle));
}
inline LayerCapture* FromHandle(torch::autograd::AutogradContext* ctx) {
  return FromHandle(ctx->saved_data["capture"].toInt());
}

// Fails (TORCH_CHECK) naming the layer when it holds no captured forward/backward pass.
void CheckCapture(const PerExampleLayer& layer);

// Per-example squared L2 norms of per_example (B, ...), float64 (B). On the CPU (float32,
// float64) one pass over the data with float64 sums (an AVX2 clone where the CPU has it).
torch::Tensor SquaredNorms(const torch::Tensor& per_example);

// out_i = x_i y_i for x (b, m, k), y (b, k, n), out (b, m, n); one GEMM per item on the
// calling thread: oneDNN's sgemm for CPU float32 where LibTorch loaded it, else at::bmm_out.
void BmmOut(torch::Tensor out, const torch::Tensor& x, const torch::Tensor& y);
torch::Tensor Bmm(const torch::Tensor& x, const torch::Tensor& y);

// The same, with the batch split across LibTorch's intra-op threads (CPU tensors with
// enough work per item; one batched kernel on accelerators).
void ParallelBmmOut(torch::Tensor out, const torch::Tensor& x, const torch::Tensor& y);
torch::Tensor ParallelBmm(const torch::Tensor& x, const torch::Tensor& y);

// How many parts ForEachChunkInParallel splits n items into: LibTorch's intra-op threads
// (at most n) for CPU tensors outside a parallel region, else 1.
int64_t ParallelParts(int64_t n, bool cpu);

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
                               const std::vector<int64_t>& shape);

// The rows of x (B, ...) of each microbatch: (M, n_max, ...), where `microbatches` (M,
// n_max) holds batch indices and B marks padding, which reads a zero row.
torch::Tensor GroupRows(const torch::Tensor& x, const torch::Tensor& microbatches);

// <X_i, Y_i>_F for each i of (B, n, n) Gram temporaries: X is overwritten (no third
// buffer) and the sum accumulates in float64 without a float64 copy.
inline torch::Tensor BatchedFrobeniusInner(torch::Tensor x, const torch::Tensor& y) {
  return x.mul_(y).sum({1, 2}, /*keepdim=*/false, torch::kFloat64);
}

// ||G_m^T A_m||_F^2 for a (M, P, d) and g (M, P, p): by the ghost identity
// <A A^T, G G^T>_F (Li et al. 2021, eq. (4)) when `method` says so or, for kAuto, when
// P^2 (d + p) < P d p; else from the product itself.
torch::Tensor PositionSquaredNorms(const torch::Tensor& a, const torch::Tensor& g,
                                   NormMethod method);

// sums[p] += sum_i scale_i * per_example_i for per_example (B, *shape), in place: the
// matrix-vector product P^T s of P (B x n), as a GEMV (one pass over P; as a (1 x B) by
// (B x n) GEMM, OpenBLAS first packs all of P), its n entries split across LibTorch's
// threads (OpenBLAS runs one thread per call, cpu_threads.h) when P is large.
void AddWeightedSum(const torch::Tensor& scale, const torch::Tensor& per_example,
                    torch::Tensor* sum);

// The geometry of a 2-D convolution (groups 1, symmetric zero padding), per axis (h, w).
struct ConvGeometry {
  std::array<int64_t, 2> kernel_size = {1, 1};
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 2> padding = {0, 0};
  std::array<int64_t, 2> dilation = {1, 1};
};

// im2row: input (b, C, H, W) -> (b, out_h * out_w, C*kh*kw), row (y, x) = the receptive
// field of output position (y, x), where out_h and out_w are the convolution's output size
// (> 0). CPU float32/float64 by dpkit's own im2row, other devices and types as a view of
// LibTorch's unfold (im2col) transposed.
torch::Tensor UnfoldRows(const torch::Tensor& input, const ConvGeometry& geometry,
                         int64_t out_h, int64_t out_w);

}  // namespace dpkit::optim::per_example_internal

#endif  // DPKIT_OPTIM_TORCH_PER_EXAMPLE_KERNELS_H_
