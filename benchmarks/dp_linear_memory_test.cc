// DpLinear over sequences keeps a materialised per-example buffer only when asked to
// (NormMethod::kMaterialize): by default (kAuto) it is released right after the norms, so a
// model's layers never hold their (B, out, in) buffers at the same time (the transformer
// DP step's peak memory, benchmarks/transformer_benchmark.cc). Counted with the counting
// allocator of benchmarks/tensor_memory.h.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "dpkit/benchmarks/tensor_memory.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "gtest/gtest.h"

namespace dpkit::benchmarks {
namespace {

// Bytes that stay live after AppendSquaredNorms of a DpLinear(32, 48) over 16 sequences of
// 40 positions (T (in + out) = 3200 > in out = 1536: materialised norms, 98,304-byte buffer).
int64_t BytesKeptAfterNorms(optim::NormMethod method) {
  CpuTensorMemory& memory = CpuTensorMemory::Install();
  torch::manual_seed(0);
  optim::DpLinear layer(32, 48);
  layer->SetNormMethod(method);
  layer->forward(torch::randn({16, 40, 32})).sum().backward();
  const int64_t before = memory.live_bytes();
  std::vector<torch::Tensor> norms;
  layer->AppendSquaredNorms(&norms);
  int64_t norm_bytes = 0;
  for (const torch::Tensor& n : norms) norm_bytes += n.numel() * n.element_size();
  return memory.live_bytes() - before - norm_bytes;
}

constexpr int64_t kBufferBytes = 16 * 48 * 32 * 4;

TEST(DpLinearMemoryTest, DefaultReleasesTheSequenceBufferAfterTheNorms) {
  EXPECT_LT(BytesKeptAfterNorms(optim::NormMethod::kAuto), kBufferBytes);
}

TEST(DpLinearMemoryTest, MaterializeKeepsItForTheClippedSum) {
  EXPECT_GE(BytesKeptAfterNorms(optim::NormMethod::kMaterialize), kBufferBytes);
}

}  // namespace
}  // namespace dpkit::benchmarks
