#include "dpkit/mechanisms/laplace.h"

#include <cmath>
#include <cstdint>

namespace dpkit::mechanisms {
namespace {
inline double LaplaceFromWord(uint64_t w, double scale) {
  // |X| ~ Exp(1/b) by inversion: -b ln U; the sign is bit 0, independent of the
  // top 53 bits that form U.
  const double magnitude = -scale * std::log(WordToUniformDoubleOpenAtZero(w));
  return (w & 1) ? -magnitude : magnitude;
}
}  // namespace

double SampleLaplace(RandomGenerator& rng, double scale) {
  return LaplaceFromWord(rng.NextUint64(), scale);
}

void FillLaplace(RandomGenerator& rng, double scale, double* out, size_t n) {
  constexpr size_t kChunk = 256;
  uint64_t words[kChunk];
  while (n > 0) {
    const size_t m = n < kChunk ? n : kChunk;
    rng.Fill(words, m);
    for (size_t i = 0; i < m; ++i) out[i] = LaplaceFromWord(words[i], scale);
    out += m;
    n -= m;
  }
}

}  // namespace dpkit::mechanisms
