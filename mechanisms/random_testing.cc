#include "dpkit/mechanisms/random_testing.h"

#include <cstddef>
#include <cstdint>

namespace dpkit::mechanisms {
namespace {
uint64_t SplitMix64(uint64_t& x) {
  // Steele, Lea, Flood 2014 (SplitMix64 finaliser as published by Vigna).
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

SeededRandomGeneratorForTesting::SeededRandomGeneratorForTesting(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : state_) s = SplitMix64(x);
}

uint64_t SeededRandomGeneratorForTesting::NextUint64() {
  // xoshiro256** (Blackman & Vigna 2018).
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return result;
}

void SeededRandomGeneratorForTesting::Fill(uint64_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = NextUint64();
}

}  // namespace dpkit::mechanisms
