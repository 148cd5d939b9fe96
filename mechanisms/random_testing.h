// Test-only random generators for the tests, benchmarks and reproducible examples of
// mechanisms/, optim/ and the Python module's dpkit.testing. This target is testonly:
// no production target can depend on it, so no production binary carries seeded noise.
#ifndef DPKIT_MECHANISMS_RANDOM_TESTING_H_
#define DPKIT_MECHANISMS_RANDOM_TESTING_H_

#include <cstddef>
#include <cstdint>

#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

// Deterministic generator for tests and reproducible examples only: xoshiro256**
// (Blackman & Vigna 2018) seeded through SplitMix64. NEVER for privacy noise.
class SeededRandomGeneratorForTesting final : public RandomGenerator {
 public:
  explicit SeededRandomGeneratorForTesting(uint64_t seed);
  uint64_t NextUint64() override;
  void Fill(uint64_t* out, size_t n) override;

 private:
  uint64_t state_[4];
};

// A seeded generator that counts the 64-bit words drawn, to check that the cost of a
// selection does not grow with the size of the table it selects from.
class CountingGeneratorForTesting final : public RandomGenerator {
 public:
  explicit CountingGeneratorForTesting(uint64_t seed) : inner_(seed) {}
  uint64_t NextUint64() override {
    ++count_;
    return inner_.NextUint64();
  }
  int64_t count() const { return count_; }

 private:
  SeededRandomGeneratorForTesting inner_;
  int64_t count_ = 0;
};

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_RANDOM_TESTING_H_
