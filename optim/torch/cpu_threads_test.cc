#include "dpkit/optim/torch/cpu_threads.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace dpkit::optim {
namespace {

TEST(CpuThreadsTest, SetsLibTorchThreads) {
  CpuThreadSetup setup = ConfigureCpuThreads(2);
  EXPECT_EQ(setup.torch_threads, 2);
  EXPECT_EQ(torch::get_num_threads(), 2);
  setup = ConfigureCpuThreads(1);
  EXPECT_EQ(torch::get_num_threads(), 1);
}

TEST(CpuThreadsTest, ZeroThreadsMeansTheHardwareConcurrency) {
  CpuThreadSetup setup = ConfigureCpuThreads(0);
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(setup.torch_threads, hardware);
  EXPECT_EQ(torch::get_num_threads(), hardware);
}

TEST(CpuThreadsTest, PthreadsOpenBlasGetsOneThreadPerCall) {
  // Asked of OpenBLAS itself, not of the setup's report.
  using GetIntFn = int (*)();
  auto get_parallel = reinterpret_cast<GetIntFn>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  auto get_threads = reinterpret_cast<GetIntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (get_parallel == nullptr || get_threads == nullptr) {
    GTEST_SKIP() << "the loaded BLAS is not OpenBLAS";
  }
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) GTEST_SKIP() << "set by the environment";
  CpuThreadSetup setup = ConfigureCpuThreads(2);
  if (get_parallel() == 1) {
    EXPECT_EQ(setup.blas, "OpenBLAS (pthreads)");
    EXPECT_EQ(get_threads(), 1);
  } else if (get_parallel() == 2) {
    EXPECT_EQ(setup.blas, "OpenBLAS (OpenMP)");
    EXPECT_EQ(get_threads(), 2);
  }
  EXPECT_EQ(setup.blas_threads, get_threads());
  EXPECT_EQ(torch::get_num_threads(), 2);  // OpenBLAS's OpenMP build must not change it
}

TEST(CpuThreadsTest, FreedLargeBlocksStayInTheHeap) {
  if (std::getenv("GLIBC_TUNABLES") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) {
    GTEST_SKIP() << "allocator settings come from the environment";
  }
  CpuThreadSetup setup = ConfigureCpuThreads(1);
  ASSERT_TRUE(setup.allocator_tuned);
  // Six 16 MiB blocks, freed together: glibc's defaults map blocks this large (mmap
  // threshold 128 KiB, raised to at most 32 MiB as mapped blocks are freed) and return a
  // free heap top above twice that threshold (at most 64 MiB) to the OS. Tuned, they come
  // from the heap and stay there, free for the next step's allocations.
  constexpr size_t kBytes = size_t{16} << 20;
  constexpr int kBlocks = 6;
  const size_t mapped_before = mallinfo2().hblkhd;
  char* blocks[kBlocks];
  for (char*& block : blocks) {
    block = static_cast<char*>(std::malloc(kBytes));
    ASSERT_NE(block, nullptr);
    std::memset(block, 1, kBytes);
  }
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "the blocks were mmapped";
  for (int i = kBlocks - 1; i >= 0; --i) std::free(blocks[i]);
  EXPECT_GE(mallinfo2().fordblks, kBlocks * kBytes) << "the freed blocks left the heap";
}

TEST(CpuThreadsTest, DescribesTheSetupInOneLine) {
  CpuThreadSetup setup;
  setup.torch_threads = 2;
  setup.blas = "OpenBLAS (pthreads)";
  setup.blas_threads = 1;
  setup.allocator_tuned = true;
  EXPECT_EQ(DescribeCpuThreadSetup(setup),
            "2 LibTorch threads, BLAS: OpenBLAS (pthreads) 1 thread per call, malloc keeps "
            "freed memory");
}

}  // namespace
}  // namespace dpkit::optim
