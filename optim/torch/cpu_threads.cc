#include "dpkit/optim/torch/cpu_threads.h"

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"

namespace dpkit::optim {
namespace {

// OpenBLAS's run-time controls (cblas.h of OpenBLAS), looked up in the loaded libraries so
// that the code neither links OpenBLAS nor fails with another BLAS (then they are absent).
using GetIntFn = int (*)();
using SetIntFn = void (*)(int);

template <typename Fn>
Fn Lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

bool EnvironmentSets(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0';
}

// Keeps freed memory in the process (see the header). 32 MiB is the largest mmap threshold
// glibc accepts on 64-bit (HEAP_MAX_SIZE / 2): the per-example layers' temporaries and
// buffers, allocated and freed every step (Conv2d materialises per-example gradients up to
// 16 MiB), get the same heap memory back each step. A trim threshold of 1 GiB
// means the heap top is returned to the OS only after a very large transient peak.
bool TuneAllocator() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (EnvironmentSets("MALLOC_TRIM_THRESHOLD_") || EnvironmentSets("MALLOC_MMAP_THRESHOLD_") ||
      (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr)) {
    return false;
  }
  return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
#else
  return false;
#endif
}

}  // namespace

CpuThreadSetup ConfigureCpuThreads(int threads) {
  CpuThreadSetup setup;
  setup.torch_threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  setup.blas_from_environment =
      EnvironmentSets("OPENBLAS_NUM_THREADS") || EnvironmentSets("GOTO_NUM_THREADS");
  auto get_parallel = Lookup<GetIntFn>("openblas_get_parallel");
  auto set_threads = Lookup<SetIntFn>("openblas_set_num_threads");
  auto get_threads = Lookup<GetIntFn>("openblas_get_num_threads");
  if (get_parallel != nullptr && set_threads != nullptr && get_threads != nullptr) {
    // openblas_get_parallel: 0 sequential, 1 pthreads, 2 OpenMP.
    const int parallel = get_parallel();
    setup.blas = parallel == 2   ? "OpenBLAS (OpenMP)"
                 : parallel == 1 ? "OpenBLAS (pthreads)"
                                 : "OpenBLAS (sequential)";
    if (!setup.blas_from_environment) {
      // The OpenMP build sets the OpenMP thread count itself (omp_set_num_threads), so it
      // gets LibTorch's; the pthreads build gets one thread (its own pool would compete).
      if (parallel == 2) set_threads(setup.torch_threads);
      if (parallel == 1) set_threads(1);
    }
    setup.blas_threads = get_threads();
  }
  // Last, so that LibTorch's OpenMP thread count is the one asked for.
  torch::set_num_threads(setup.torch_threads);
  setup.allocator_tuned = TuneAllocator();
  return setup;
}

std::string DescribeCpuThreadSetup(const CpuThreadSetup& setup) {
  std::string blas = setup.blas;
  if (setup.blas_threads > 0) {
    absl::StrAppend(&blas, " ", setup.blas_threads,
                    setup.blas_threads == 1 ? " thread" : " threads", " per call",
                    setup.blas_from_environment ? " (from the environment)" : "");
  }
  return absl::StrCat(setup.torch_threads,
                      setup.torch_threads == 1 ? " LibTorch thread, " : " LibTorch threads, ",
                      "BLAS: ", blas,
                      setup.allocator_tuned ? ", malloc keeps freed memory" : "");
}

}  // namespace dpkit::optim
