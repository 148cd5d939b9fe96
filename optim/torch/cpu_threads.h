// CPU thread and allocator set-up for LibTorch training, called once at start-up by the
// trainers and the training benchmark.
//
// DP-SGD on the CPU runs many small products per step, so how the process's threads and
// memory are arranged matters as much as the arithmetic (measured on the 2-core machine,
// see optim/README.md):
//   * LibTorch parallelises with OpenMP (Debian's build: the OpenMP backend, no MKL). Its
//     matrix products call the system BLAS; OpenBLAS's pthreads build (libopenblas0-pthread)
//     keeps its OWN pool of threads, which spin (sched_yield) for a while after every call:
//     with LibTorch's OpenMP threads that is twice as many busy threads as cores. Here the
//     pthreads OpenBLAS is set to one thread per call (LibTorch splits the work across its
//     threads above the BLAS; the largest single products of the models here are a few
//     million multiply-adds); OpenBLAS's OpenMP build shares LibTorch's OpenMP pool and
//     runs single-threaded inside parallel regions, so it gets LibTorch's thread count.
//   * glibc's malloc returns the top of its heap to the OS once more than M_TRIM_THRESHOLD
//     bytes are free and serves large blocks by mmap; a training step that frees and
//     allocates the same tens of MB every step then page-faults them back in every step.
//     Fixed thresholds keep freed memory in the process for reuse (peak live memory is
//     unchanged; resident memory stays at its high-water mark).
// OpenMP's wait policy cannot be set from inside the process (libgomp reads
// OMP_WAIT_POLICY when it is loaded); tools/main exports OMP_WAIT_POLICY=PASSIVE.
// Explicit user settings win: OPENBLAS_NUM_THREADS / GOTO_NUM_THREADS leave the BLAS
// alone, MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ / GLIBC_TUNABLES the allocator.
#ifndef DPKIT_OPTIM_TORCH_CPU_THREADS_H_
#define DPKIT_OPTIM_TORCH_CPU_THREADS_H_

#include <string>

namespace dpkit::optim {

struct CpuThreadSetup {
  int torch_threads = 0;       // LibTorch intra-op (OpenMP) threads
  std::string blas = "unknown";  // "OpenBLAS (pthreads)", "OpenBLAS (OpenMP)", ...
  int blas_threads = -1;       // threads per BLAS call (-1: not known, e.g. reference BLAS)
  bool blas_from_environment = false;  // OPENBLAS_NUM_THREADS or GOTO_NUM_THREADS set
  bool allocator_tuned = false;        // glibc malloc keeps freed memory (see above)
};

// Sets LibTorch's intra-op threads to `threads` (<= 0: the hardware's), then the BLAS and
// the allocator as described above. Process-wide; call before the first tensor operation.
CpuThreadSetup ConfigureCpuThreads(int threads);

// One line for logs: "2 LibTorch threads, OpenBLAS (pthreads) 1 thread per call, malloc
// keeps freed memory".
std::string DescribeCpuThreadSetup(const CpuThreadSetup& setup);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_CPU_THREADS_H_
