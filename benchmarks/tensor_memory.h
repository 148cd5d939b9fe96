// Live CPU tensor memory of this process, for the benchmarks' memory counters: c10's CPU
// allocator is replaced (c10::SetCPUAllocator) by one that allocates as c10's default does
// (c10::alloc_cpu, 64-byte aligned) and counts the bytes of the blocks not yet freed, and
// their peak since ResetPeak(). Tensors allocated before Install() are not counted (their
// frees go to the allocator that made them), so install before building the model.
#ifndef DPKIT_BENCHMARKS_TENSOR_MEMORY_H_
#define DPKIT_BENCHMARKS_TENSOR_MEMORY_H_

#include <cstdint>

namespace dpkit::benchmarks {

class CpuTensorMemory {
 public:
  // Installs the counting allocator once per process; later calls return the same object.
  static CpuTensorMemory& Install();
  int64_t live_bytes() const;
  // The largest live_bytes() since the last ResetPeak() (or Install()).
  int64_t peak_bytes() const;
  void ResetPeak();

 private:
  CpuTensorMemory() = default;
};

}  // namespace dpkit::benchmarks

#endif  // DPKIT_BENCHMARKS_TENSOR_MEMORY_H_
