#include "dpkit/benchmarks/tensor_memory.h"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

namespace dpkit::benchmarks {
namespace {

// The sizes of the live blocks (a block's size is not passed to its deleter).
struct Counts {
  std::mutex mutex;
  std::unordered_map<void*, size_t> sizes;
  int64_t live = 0, peak = 0;
};

Counts& TheCounts() {
  static Counts* counts = new Counts();  // never destroyed: tensors may outlive main
  return *counts;
}

void CountedFree(void* data) {
  if (data == nullptr) return;
  Counts& c = TheCounts();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.sizes.find(data);
    if (it != c.sizes.end()) {
      c.live -= static_cast<int64_t>(it->second);
      c.sizes.erase(it);
    }
  }
  c10::free_cpu(data);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    void* data = c10::alloc_cpu(n);
    if (data != nullptr) {
      Counts& c = TheCounts();
      std::lock_guard<std::mutex> lock(c.mutex);
      c.sizes[data] = n;
      c.live += static_cast<int64_t>(n);
      c.peak = std::max(c.peak, c.live);
    }
    // Context == data, as raw_allocate() requires.
    return {data, data, &CountedFree, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountedFree; }
};

}  // namespace

CpuTensorMemory& CpuTensorMemory::Install() {
  static CpuTensorMemory* memory = [] {
    static CountingCpuAllocator* allocator = new CountingCpuAllocator();
    // Priority above the default allocator's (0), so this one is used from now on.
    c10::SetCPUAllocator(allocator, /*priority=*/1);
    return new CpuTensorMemory();
  }();
  return *memory;
}

int64_t CpuTensorMemory::live_bytes() const {
  Counts& c = TheCounts();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.live;
}

int64_t CpuTensorMemory::peak_bytes() const {
  Counts& c = TheCounts();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.peak;
}

void CpuTensorMemory::ResetPeak() {
  Counts& c = TheCounts();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.peak = c.live;
}

}  // namespace dpkit::benchmarks
