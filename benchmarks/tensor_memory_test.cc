#include "dpkit/benchmarks/tensor_memory.h"

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace dpkit::benchmarks {
namespace {

TEST(CpuTensorMemoryTest, CountsLiveTensorBytesAndTheirPeak) {
  CpuTensorMemory& memory = CpuTensorMemory::Install();
  EXPECT_EQ(&CpuTensorMemory::Install(), &memory);
  const int64_t before = memory.live_bytes();
  memory.ResetPeak();
  {
    torch::Tensor a = torch::empty({1000}, torch::kFloat32);    // 4,000 bytes
    torch::Tensor b = torch::empty({250, 2}, torch::kFloat64);  // 4,000 bytes
    EXPECT_EQ(memory.live_bytes() - before, 8000);
    b = torch::Tensor();
    EXPECT_EQ(memory.live_bytes() - before, 4000);
    torch::Tensor view = a.narrow(0, 0, 10);  // shares a's storage: no new bytes
    EXPECT_EQ(memory.live_bytes() - before, 4000);
  }
  EXPECT_EQ(memory.live_bytes(), before);
  EXPECT_EQ(memory.peak_bytes() - before, 8000);
  memory.ResetPeak();
  EXPECT_EQ(memory.peak_bytes(), before);
  // A product's output and temporaries are counted by the operators themselves.
  torch::Tensor x = torch::ones({64, 64});
  torch::Tensor y = x.matmul(x);
  EXPECT_GE(memory.peak_bytes() - before, 2 * 64 * 64 * 4);
  EXPECT_EQ(y[0][0].item<float>(), 64.0f);
}

}  // namespace
}  // namespace dpkit::benchmarks
