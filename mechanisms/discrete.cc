#include "dpkit/mechanisms/discrete.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpkit::mechanisms {
namespace {

// Samples Lap_Z(t/s) for integers t, s >= 1 (Canonne, Kamath, Steinke 2020, Alg. 2).
BigInt DiscreteLaplaceBig(RandomGenerator& rng, const BigInt& t, const BigInt& s) {
  static const BigInt kOne = 1;
  while (true) {
    const BigInt u = UniformBigIntBelow(rng, t);
    if (!SampleBernoulliExpMinus(rng, u, t)) continue;   // accept U w.p. exp(-U/t)
    BigInt v = 0;
    while (SampleBernoulliExpMinus(rng, kOne, kOne)) ++v;  // V ~ Geometric(1 - e^-1)
    const BigInt x = u + t * v;                            // X ~ Geometric(1 - e^{-1/t})
    const BigInt y = x / s;                                // floor(X / s)
    const bool negative = (rng.NextUint64() & 1) != 0;
    if (negative && y == 0) continue;  // reject -0 so that 0 is not counted twice
    return negative ? BigInt(-y) : y;
  }
}

bool FitsInt64(const BigInt& x) {
  return x >= std::numeric_limits<int64_t>::min() && x <= std::numeric_limits<int64_t>::max();
}

}  // namespace

BigInt UniformBigIntBelow(RandomGenerator& rng, const BigInt& bound) {
  if (bound <= std::numeric_limits<uint64_t>::max()) {
    return BigInt(UniformUint64Below(rng, static_cast<uint64_t>(bound)));
  }
  // Rejection sampling on the smallest power of two above bound (acceptance > 1/2).
  const unsigned bits = boost::multiprecision::msb(bound) + 1;
  const unsigned words = (bits + 63) / 64;
  while (true) {
    BigInt x = 0;
    for (unsigned i = 0; i < words; ++i) {
      x <<= 64;
      x |= rng.NextUint64();
    }
    x >>= words * 64 - bits;
    if (x < bound) return x;
  }
}

bool SampleBernoulliRational(RandomGenerator& rng, const BigInt& numerator,
                             const BigInt& denominator) {
  return UniformBigIntBelow(rng, denominator) < numerator;
}

bool SampleBernoulliExpMinus(RandomGenerator& rng, const BigInt& numerator,
                             const BigInt& denominator) {
  // Canonne, Kamath, Steinke 2020, Algorithm 1.
  if (numerator <= denominator) {
    // gamma in [0, 1]: K is the first index with A_K = 0 for A_k ~ Bernoulli(gamma/k);
    // P(K odd) = exp(-gamma).
    BigInt k = 1;
    while (SampleBernoulliRational(rng, numerator, denominator * k)) ++k;
    return (k & 1) == 1;
  }
  // gamma > 1: exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))).
  const BigInt whole = numerator / denominator;
  static const BigInt kOne = 1;
  for (BigInt i = 0; i < whole; ++i) {
    if (!SampleBernoulliExpMinus(rng, kOne, kOne)) return false;
  }
  return SampleBernoulliExpMinus(rng, numerator - whole * denominator, denominator);
}

void DoubleToRational(double value, BigInt* numerator, BigInt* denominator) {
  int exponent = 0;
  const double fraction = std::frexp(value, &exponent);  // value = fraction * 2^exponent
  // fraction * 2^53 is an integer (53-bit significand).
  const uint64_t mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));
  exponent -= 53;
  *numerator = mantissa;
  *denominator = 1;
  if (exponent >= 0) {
    *numerator <<= exponent;
  } else {
    *denominator <<= -exponent;
  }
  // Reduce by common powers of two (keeps the integers small).
  while (*numerator != 0 && (*numerator & 1) == 0 && (*denominator & 1) == 0) {
    *numerator >>= 1;
    *denominator >>= 1;
  }
}

absl::StatusOr<DiscreteLaplaceSampler> DiscreteLaplaceSampler::Create(double scale) {
  if (!(std::isfinite(scale) && scale > 0 && scale <= 0x1.0p50)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale must be finite and in (0, 2^50], got ", scale));
  }
  BigInt t, s;
  DoubleToRational(scale, &t, &s);
  return DiscreteLaplaceSampler(scale, std::move(t), std::move(s));
}

int64_t DiscreteLaplaceSampler::Sample(RandomGenerator& rng) const {
  while (true) {
    const BigInt y = DiscreteLaplaceBig(rng, t_, s_);
    if (FitsInt64(y)) return static_cast<int64_t>(y);
  }
}

absl::StatusOr<DiscreteGaussianSampler> DiscreteGaussianSampler::Create(double sigma) {
  if (!(std::isfinite(sigma) && sigma > 0 && sigma <= 0x1.0p40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sigma must be finite and in (0, 2^40], got ", sigma));
  }
  BigInt a, b;
  DoubleToRational(sigma, &a, &b);
  BigInt p = a * a, q = b * b;  // sigma^2 = p/q exactly
  // t = floor(sigma) + 1 = floor(sqrt(floor(p/q))) + 1.
  BigInt t = boost::multiprecision::sqrt(BigInt(p / q)) + 1;
  return DiscreteGaussianSampler(sigma, std::move(p), std::move(q), std::move(t));
}

int64_t DiscreteGaussianSampler::Sample(RandomGenerator& rng) const {
  // Canonne, Kamath, Steinke 2020, Algorithm 3.
  static const BigInt kOne = 1;
  while (true) {
    const BigInt y = DiscreteLaplaceBig(rng, t_, kOne);
    // gamma = (|Y| - sigma^2/t)^2 / (2 sigma^2) = (|Y| q t - p)^2 / (2 p q t^2).
    const BigInt diff = boost::multiprecision::abs(y) * q_ * t_ - p_;
    if (SampleBernoulliExpMinus(rng, diff * diff, 2 * p_ * q_ * t_ * t_) && FitsInt64(y)) {
      return static_cast<int64_t>(y);
    }
  }
}

}  // namespace dpkit::mechanisms
