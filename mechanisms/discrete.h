// Exact samplers for the discrete Laplace and discrete Gaussian distributions
// (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential
// Privacy", Algorithms 1-3).
//
// Every step uses exact rational arithmetic on arbitrary-precision integers
// (boost::multiprecision::cpp_int) and uniform integers from the generator; no
// floating-point operation touches the noise, so the samples follow the stated
// distribution exactly (given a uniform generator). A double parameter is converted
// to the rational it represents exactly (a double is m * 2^e).
#ifndef DPKIT_MECHANISMS_DISCRETE_H_
#define DPKIT_MECHANISMS_DISCRETE_H_

#include <cstdint>

#include <boost/multiprecision/cpp_int.hpp>

#include "absl/status/statusor.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

using BigInt = boost::multiprecision::cpp_int;

// A uniform integer in [0, bound); bound > 0.
BigInt UniformBigIntBelow(RandomGenerator& rng, const BigInt& bound);

// True with probability numerator/denominator; 0 <= numerator <= denominator,
// denominator > 0.
bool SampleBernoulliRational(RandomGenerator& rng, const BigInt& numerator,
                             const BigInt& denominator);

// True with probability exp(-gamma), gamma = numerator/denominator >= 0
// (Canonne, Kamath, Steinke 2020, Algorithm 1).
bool SampleBernoulliExpMinus(RandomGenerator& rng, const BigInt& numerator,
                             const BigInt& denominator);

// Writes the exact rational value of a finite double >= 0 as numerator/denominator.
void DoubleToRational(double value, BigInt* numerator, BigInt* denominator);

// Discrete Laplace on the integers: P(x) proportional to exp(-|x|/scale)
// (Canonne, Kamath, Steinke 2020, Algorithm 2, with scale = t/s).
class DiscreteLaplaceSampler {
 public:
  // scale finite, > 0 and <= 2^50 (so that samples fit in int64 except with
  // probability below 2^-4000).
  static absl::StatusOr<DiscreteLaplaceSampler> Create(double scale);
  int64_t Sample(RandomGenerator& rng) const;
  double scale() const { return scale_; }

 private:
  DiscreteLaplaceSampler(double scale, BigInt t, BigInt s)
      : scale_(scale), t_(std::move(t)), s_(std::move(s)) {}
  double scale_;
  BigInt t_;  // scale = t / s
  BigInt s_;
};

// Discrete Gaussian on the integers: P(x) proportional to exp(-x^2 / (2 sigma^2))
// (Canonne, Kamath, Steinke 2020, Algorithm 3: rejection from a discrete Laplace
// with scale floor(sigma) + 1).
class DiscreteGaussianSampler {
 public:
  // sigma finite, > 0 and <= 2^40.
  static absl::StatusOr<DiscreteGaussianSampler> Create(double sigma);
  int64_t Sample(RandomGenerator& rng) const;
  double sigma() const { return sigma_; }

 private:
  DiscreteGaussianSampler(double sigma, BigInt p, BigInt q, BigInt t)
      : sigma_(sigma), p_(std::move(p)), q_(std::move(q)), t_(std::move(t)) {}
  double sigma_;
  BigInt p_;  // sigma^2 = p / q exactly
  BigInt q_;
  BigInt t_;  // floor(sigma) + 1
};

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_DISCRETE_H_
