#include "dpkit/optim/torch/per_example_kernels.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace dpkit::optim::per_example_internal {
namespace {

namespace F = torch::nn::functional;

// Largest absolute difference relative to the largest absolute reference value.
double RelativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  const double scale = expected.abs().max().item<double>();
  const double diff =
      (actual.to(torch::kFloat64) - expected.to(torch::kFloat64)).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

// Sets LibTorch's intra-op threads for a scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : saved_(torch::get_num_threads()) {
    torch::set_num_threads(threads);
  }
  ~ScopedThreads() { torch::set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(PerExampleKernelsTest, SquaredNormsMatchLibTorchInFloat32AndFloat64) {
  // 3 * 7 = 21 entries per example: not a multiple of a vector width, so the reduction's
  // tail is exercised. Both sums are in float64 (the float32 squares are exact there) and
  // differ only in summation order: 21 terms, relative 21 * 2^-53 < 1e-14.
  torch::manual_seed(31);
  for (torch::ScalarType type : {torch::kFloat32, torch::kFloat64}) {
    torch::Tensor x = torch::randn({5, 3, 7}, type);
    torch::Tensor norms = SquaredNorms(x);
    EXPECT_EQ(norms.scalar_type(), torch::kFloat64);
    EXPECT_LT(RelativeError(norms, x.to(torch::kFloat64).pow(2).sum({1, 2})), 1e-14);
    // A non-contiguous view (the kernel copies it first).
    torch::Tensor t = x.transpose(1, 2);
    EXPECT_LT(RelativeError(SquaredNorms(t), t.to(torch::kFloat64).pow(2).sum({1, 2})), 1e-14);
  }
}

TEST(PerExampleKernelsTest, BatchedProductsMatchTorchBmmForEveryLayout) {
  // Plain and transposed operands (sgemm's 'N' and 'T'), float32 (oneDNN's sgemm where
  // LibTorch loaded it) and float64 (at::bmm_out), at 1 and 2 threads; float32 products of
  // 24 terms: relative rounding ~24 * 6e-8, so 1e-5 leaves margin.
  torch::manual_seed(32);
  for (torch::ScalarType type : {torch::kFloat32, torch::kFloat64}) {
    torch::Tensor x = torch::randn({6, 5, 24}, type);
    torch::Tensor y = torch::randn({6, 24, 7}, type);
    torch::Tensor xt = torch::randn({6, 24, 5}, type).transpose(1, 2);  // stored transposed
    torch::Tensor yt = torch::randn({6, 7, 24}, type).transpose(1, 2);
    for (int threads : {1, 2}) {
      ScopedThreads scoped(threads);
      for (const auto& [a, b] : std::vector<std::pair<torch::Tensor, torch::Tensor>>{
               {x, y}, {xt, y}, {x, yt}, {xt, yt}}) {
        torch::Tensor want = torch::bmm(a.to(torch::kFloat64), b.to(torch::kFloat64));
        EXPECT_LT(RelativeError(Bmm(a, b), want), 1e-5);
        EXPECT_LT(RelativeError(ParallelBmm(a, b), want), 1e-5);
      }
    }
  }
}

TEST(PerExampleKernelsTest, LargeParallelProductsAtTwoThreadsMatchTorchBmm) {
  // 64^3 multiply-adds per item: above the size from which ParallelBmmOut splits the batch.
  torch::manual_seed(33);
  ScopedThreads scoped(2);
  torch::Tensor x = torch::randn({5, 64, 64}, torch::kFloat64);
  torch::Tensor y = torch::randn({5, 64, 64}, torch::kFloat64);
  torch::Tensor out = torch::empty({5, 64, 64}, torch::kFloat64);
  ParallelBmmOut(out, x, y);
  // float64, 64 terms: relative rounding below 1e-13.
  EXPECT_LT(RelativeError(out, torch::bmm(x, y)), 1e-13);
}

TEST(PerExampleKernelsTest, UnfoldRowsEqualsLibTorchUnfoldTransposed) {
  // im2row copies values, so it must equal LibTorch's im2col exactly: kernel widths 1-9
  // (compile-time copies for 2, 3, 4, 5, 7, 8 at dilation 1), strides, paddings, dilations.
  torch::manual_seed(34);
  for (torch::ScalarType type : {torch::kFloat32, torch::kFloat64}) {
    torch::Tensor input = torch::randn({3, 2, 7, 19}, type);
    for (int64_t width = 1; width <= 9; ++width) {
      for (int64_t stride : {1, 2}) {
        for (int64_t padding : {0, 2}) {
          for (int64_t dilation : {1, 2}) {
            ConvGeometry g;
            g.kernel_size = {2, width};
            g.stride = {stride, stride};
            g.padding = {padding, padding};
            g.dilation = {dilation, dilation};
            const int64_t out_h = (7 + 2 * padding - dilation - 1) / stride + 1;
            const int64_t out_w = (19 + 2 * padding - dilation * (width - 1) - 1) / stride + 1;
            torch::Tensor want =
                F::unfold(input, F::UnfoldFuncOptions({2, width})
                                     .dilation({dilation, dilation})
                                     .padding({padding, padding})
                                     .stride({stride, stride}))
                    .transpose(1, 2);
            EXPECT_TRUE(torch::equal(UnfoldRows(input, g, out_h, out_w), want))
                << "kernel 2x" << width << " stride " << stride << " padding " << padding
                << " dilation " << dilation;
          }
        }
      }
    }
  }
}

TEST(PerExampleKernelsTest, ChunksCoverEveryItemOnceWithinTheirPart) {
  for (int threads : {1, 2}) {
    ScopedThreads scoped(threads);
    const int64_t n = 37, max_chunk = 5;
    const int64_t parts = ParallelParts(n, /*cpu=*/true);
    EXPECT_EQ(parts, threads);
    // Each part runs on one thread, so per-part lists need no lock.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> chunks(parts);
    ForEachChunkInParallel(n, max_chunk, /*cpu=*/true,
                           [&](int64_t part, int64_t start, int64_t len) {
                             chunks[part].push_back({start, len});
                           });
    std::vector<int> seen(n, 0);
    for (int64_t p = 0; p < parts; ++p) {
      // Part p is the contiguous range [p n / parts, (p + 1) n / parts) in order.
      int64_t next = p * n / parts;
      for (const auto& [start, len] : chunks[p]) {
        EXPECT_EQ(start, next);
        EXPECT_GE(len, 1);
        EXPECT_LE(len, max_chunk);
        for (int64_t i = start; i < start + len; ++i) ++seen[i];
        next = start + len;
      }
      EXPECT_EQ(next, (p + 1) * n / parts);
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n) << threads << " threads";
  }
  // Accelerator tensors (cpu = false) and empty ranges: one part, no call for n = 0.
  EXPECT_EQ(ParallelParts(37, /*cpu=*/false), 1);
  int calls = 0;
  ForEachChunkInParallel(0, 5, true, [&](int64_t, int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(PerExampleKernelsTest, GroupRowsReadsZeroRowsForPadding) {
  torch::Tensor x = torch::arange(1, 7, torch::kFloat64).view({3, 2});  // rows 0, 1, 2
  torch::Tensor microbatches = torch::tensor({2, 0, 1, 3}, torch::kLong).view({2, 2});
  torch::Tensor want = torch::tensor({5., 6., 1., 2., 3., 4., 0., 0.}, torch::kFloat64)
                           .view({2, 2, 2});
  EXPECT_TRUE(torch::equal(GroupRows(x, microbatches), want));
}

TEST(PerExampleKernelsTest, WeightedSumsMatchAtOneAndTwoThreads) {
  // 4 x 300 x 1000 = 1.2 M elements: at 2 threads the columns are split across threads
  // (from 1 M elements). float64 sums of 4 terms: relative rounding below 1e-15.
  torch::manual_seed(35);
  torch::Tensor per = torch::randn({4, 300, 1000}, torch::kFloat64);
  torch::Tensor scale = torch::rand({4}, torch::kFloat64);
  torch::Tensor want = (per * scale.view({4, 1, 1})).sum(0);
  for (int threads : {1, 2}) {
    ScopedThreads scoped(threads);
    torch::Tensor sum = torch::ones({300, 1000}, torch::kFloat64);
    AddWeightedSum(scale, per, &sum);
    EXPECT_LT(RelativeError(sum - 1, want), 1e-14) << threads << " threads";
  }
}

TEST(PerExampleKernelsTest, GhostAndMaterialisedPositionNormsAgree) {
  // ||G^T A||_F^2 by the ghost identity (Li et al. 2021, eq. (4)) and from the product:
  // float64, products of 9 positions and sums of 48 terms, below 1e-12 relative.
  torch::manual_seed(36);
  torch::Tensor a = torch::randn({3, 9, 6}, torch::kFloat64);
  torch::Tensor g = torch::randn({3, 9, 8}, torch::kFloat64);
  torch::Tensor want = torch::bmm(g.transpose(1, 2), a).pow(2).sum({1, 2});
  for (NormMethod method : {NormMethod::kGhost, NormMethod::kMaterialize, NormMethod::kAuto}) {
    EXPECT_LT(RelativeError(PositionSquaredNorms(a, g, method), want), 1e-12)
        << static_cast<int>(method);
  }
}

}  // namespace
}  // namespace dpkit::optim::per_example_internal
