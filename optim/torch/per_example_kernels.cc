#include "dpkit/optim/torch/per_example_kernels.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace dpkit::optim::per_example_internal {
namespace {

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

// Batched matrix products split across LibTorch's intra-op threads. CPU builds of LibTorch
// without MKL (Debian's) compute bmm as a SERIAL loop of one small GEMM per batch item
// (aten/src/ATen/native/LinearAlgebra.cpp, bmm_out_or_baddbmm_: the batch is split over
// threads only on mobile builds), so every per-example product would run on one thread
// while the rest of a training step uses all of them. Here each thread takes a contiguous
// range of examples; inside a parallel region LibTorch's own ops run single-threaded in
// the calling thread, so nothing is oversubscribed. Small products stay serial.
constexpr int64_t kParallelMinMultiplyAdds = int64_t{1} << 16;

// im2row: (b, C, H, W) -> (b, Ho*Wo, C*kh*kw). Row (y, x) of an example holds the receptive
// field of output position (y, x): element (c, i, j) = input[c, y*sh + i*dh - ph,
// x*sw + j*dw - pw] (zero outside the input), so each example's block is the transpose of
// torch::nn::functional::unfold's (C*kh*kw, L) im2col, and the rows of a batch stack into
// one (b*L, C*kh*kw) matrix (DpConv2d's AddScaledGradientSums multiplies it as one GEMM).
// Each example is copied into a zero-padded scratch first, so the gather has no bounds
// checks, and one kernel row (j = 0..kw-1) at dilation 1 is a run of kw consecutive inputs,
// copied with a compile-time length for the common widths. Debian's LibTorch 1.13 CPU
// im2col (im2col_out_cpu) bounds-checks and indexes every element, one example after
// another (MNIST CNN conv1, 256 examples, one thread: 4.0 ms); a strided im2col with
// per-row bounds took 1.6 ms (conv2 1.0 ms), this im2row 0.2 ms (conv2 0.2 ms).
template <typename T, int kKernelWidth>
void Im2RowExample(const T* padded, int64_t channels, int64_t padded_h, int64_t padded_w,
                   const ConvGeometry& o, int64_t out_h, int64_t out_w, T* out) {
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
            const ConvGeometry& o, int64_t out_h, int64_t out_w, T* out) {
  const int64_t ph = o.padding[0], pw = o.padding[1];
  const int64_t padded_h = height + 2 * ph, padded_w = width + 2 * pw;
  const int64_t row_length = channels * o.kernel_size[0] * o.kernel_size[1];
  // Reads stay inside the padded example: the largest row read is
  // (out_h - 1) sh + (kh - 1) dh <= height + 2 ph - 1 by the definition of out_h (columns
  // alike). The zero border is written once; each example overwrites only the interior.
  std::vector<T> scratch;
  if (ph > 0 || pw > 0) scratch.assign(channels * padded_h * padded_w, T(0));
  void (*kernel)(const T*, int64_t, int64_t, int64_t, const ConvGeometry&, int64_t,
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

}  // namespace

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

torch::Tensor UnfoldRows(const torch::Tensor& input, const ConvGeometry& o, int64_t out_h,
                         int64_t out_w) {
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

}  // namespace dpkit::optim::per_example_internal
