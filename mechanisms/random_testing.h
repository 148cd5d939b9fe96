// Test-only random generators for the tests of mechanisms/ and optim/.
#ifndef DPKIT_MECHANISMS_RANDOM_TESTING_H_
#define DPKIT_MECHANISMS_RANDOM_TESTING_H_

#include <cstdint>

#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

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
