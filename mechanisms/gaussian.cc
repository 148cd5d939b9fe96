#include "dpkit/mechanisms/gaussian.h"

#include <cmath>
#include <cstdint>

namespace dpkit::mechanisms {
namespace {

constexpr int kLayers = 256;

// Unnormalised half-normal density f(x) = exp(-x^2/2), x >= 0.
double Density(double x) { return std::exp(-0.5 * x * x); }

// Ziggurat tables (Marsaglia & Tsang 2000, Sec. 2; Doornik 2005, Sec. 3).
// Layer 0 is the base strip [0, r] x [0, f(r)] plus the tail x > r; layer i >= 1
// is the box [0, x[i]] x [f(x[i]), f(x[i+1])]. All layers have area v.
struct Tables {
  double x[kLayers + 1];  // x[0] = v / f(r), x[1] = r, decreasing to x[256] = 0
  double f[kLayers + 1];  // f[i] = f(x[i]) (f[0] := f(r) for the base strip)
  double r;
};

// Builds the layers for a tail start r. Returns v minus the area of the top box
// (zero at the right r); +1 if the layers run out before the top (r too small).
double BuildLayers(double r, Tables* t) {
  // Area of each layer: rectangle r f(r) plus tail integral sqrt(pi/2) erfc(r/sqrt2).
  const double v = r * Density(r) + std::sqrt(M_PI / 2) * std::erfc(r / std::sqrt(2.0));
  t->r = r;
  t->x[0] = v / Density(r);
  t->f[0] = Density(r);
  t->x[1] = r;
  t->f[1] = Density(r);
  for (int i = 2; i < kLayers; ++i) {
    // Marsaglia & Tsang 2000: f(x[i]) = v / x[i-1] + f(x[i-1]).
    const double next_f = v / t->x[i - 1] + t->f[i - 1];
    if (!(next_f < 1.0)) return 1.0;
    t->x[i] = std::sqrt(-2.0 * std::log(next_f));
    t->f[i] = next_f;
  }
  t->x[kLayers] = 0.0;
  t->f[kLayers] = 1.0;
  return v - t->x[kLayers - 1] * (1.0 - t->f[kLayers - 1]);
}

const Tables& ZigguratTables() {
  static const Tables* const tables = [] {
    auto* t = new Tables();
    // Bisection for r on [3, 4.5]: r = 3 runs out of layers, r = 4.5 leaves a
    // top box far larger than v. Stop when the bracket cannot shrink further.
    double low = 3.0, high = 4.5;
    while (true) {
      const double mid = 0.5 * (low + high);
      if (mid <= low || mid >= high) break;
      if (BuildLayers(mid, t) > 0) {
        low = mid;
      } else {
        high = mid;
      }
    }
    BuildLayers(high, t);
    return t;
  }();
  return *tables;
}

// One standard normal draw (Doornik 2005, "ZIGNOR", with 256 layers): the low 8
// bits pick the layer, bit 8 the sign, the top 53 bits the position.
template <typename Words>
inline double ZigguratSample(const Tables& t, Words& words) {
  while (true) {
    const uint64_t w = words.Next();
    const int layer = static_cast<int>(w & 0xFF);
    const bool negative = (w & 0x100) != 0;
    const double x = WordToUniformDouble(w) * t.x[layer];
    if (x < t.x[layer + 1]) return negative ? -x : x;  // inside the core rectangle
    if (layer == 0) {
      // Tail beyond r (Marsaglia 1964): accept r + a, a = -ln(U1)/r, when
      // -2 ln(U2) > a^2.
      double a, b;
      do {
        a = -std::log(WordToUniformDoubleOpenAtZero(words.Next())) / t.r;
        b = -std::log(WordToUniformDoubleOpenAtZero(words.Next()));
      } while (b + b < a * a);
      return negative ? -(t.r + a) : t.r + a;
    }
    // Wedge: accept if a uniform height in [f(x[layer]), f(x[layer+1])] is under
    // the density.
    const double y =
        t.f[layer] + WordToUniformDouble(words.Next()) * (t.f[layer + 1] - t.f[layer]);
    if (y < Density(x)) return negative ? -x : x;
  }
}

template <typename T, bool kAdd>
void FillImpl(RandomGenerator& rng, double stddev, T* out, size_t n) {
  const Tables& t = ZigguratTables();
  BufferedWords<256> words(rng);
  for (size_t i = 0; i < n; ++i) {
    const double z = stddev * ZigguratSample(t, words);
    if constexpr (kAdd) {
      out[i] = static_cast<T>(out[i] + z);
    } else {
      out[i] = static_cast<T>(z);
    }
  }
}

}  // namespace

void FillGaussian(RandomGenerator& rng, double stddev, float* out, size_t n) {
  FillImpl<float, false>(rng, stddev, out, n);
}
void FillGaussian(RandomGenerator& rng, double stddev, double* out, size_t n) {
  FillImpl<double, false>(rng, stddev, out, n);
}
void AddGaussian(RandomGenerator& rng, double stddev, float* out, size_t n) {
  FillImpl<float, true>(rng, stddev, out, n);
}
void AddGaussian(RandomGenerator& rng, double stddev, double* out, size_t n) {
  FillImpl<double, true>(rng, stddev, out, n);
}

double StandardGaussian(RandomGenerator& rng) {
  struct DirectWords {
    RandomGenerator& rng;
    uint64_t Next() { return rng.NextUint64(); }
  } words{rng};
  return ZigguratSample(ZigguratTables(), words);
}

}  // namespace dpkit::mechanisms
