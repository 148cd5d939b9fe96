// Additive noise mechanisms that release a noisy statistic and say what they spent.
//
// Floating-point safety (Mironov 2012, "On Significance of the Least Significant
// Bits for Differential Privacy"): adding floating-point Laplace or Gaussian noise
// to a double leaks the input through the set of reachable outputs. The real-valued
// mechanisms here never add floating-point noise. They
//   1. round the input to the lattice G*Z, where the granularity G is a power of
//      two <= sensitivity / 1024: r = round(value / G) (exact: G is a power of 2);
//   2. add exact integer noise Z (discrete Laplace / discrete Gaussian, sampled with
//      rational arithmetic only, mechanisms/discrete.h);
//   3. output (r + Z) * G, computed exactly (|r + Z| < 2^53, G a power of two).
// Proof that the low bits do not leak: the output is the exact image of the
// integer r + Z under k -> k*G, a fixed injective map, so the output's distribution
// is a function of r alone (post-processing). Neighbouring inputs with
// |value - value'| <= sensitivity have |r - r'| < |value - value'|/G + 1, hence
// |r - r'| <= floor(sensitivity/G) + 1 =: integer_sensitivity, and the integer
// mechanism is private for that sensitivity (below). The price is at most
// G/sensitivity <= 1/1024 relative extra noise.
#ifndef DPKIT_MECHANISMS_ADDITIVE_H_
#define DPKIT_MECHANISMS_ADDITIVE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/mechanisms/discrete.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

// epsilon-DP release of an integer query with L1 sensitivity Delta: value + Z,
// Z ~ discrete Laplace with scale Delta/epsilon. Pure DP: P(z)/P(z') <=
// exp(|z - z'|/scale) (Canonne, Kamath, Steinke 2020, Sec. 2.1 / Ghosh et al. 2012).
// Event: PureDp(epsilon).
class DiscreteLaplaceMechanism {
 public:
  static absl::StatusOr<DiscreteLaplaceMechanism> Create(double epsilon,
                                                         int64_t l1_sensitivity);
  int64_t Release(int64_t value, RandomGenerator& rng) const;
  double scale() const { return sampler_.scale(); }
  double epsilon() const { return epsilon_; }
  accounting::Event event() const;
  // Smallest integer k with P(|Z| > k) <= 1 - confidence, exact for the discrete
  // Laplace: P(|Z| > k) = 2 e^{-(k+1)/b} / (1 + e^{-1/b}).
  absl::StatusOr<int64_t> NoiseHalfWidth(double confidence) const;

 private:
  DiscreteLaplaceMechanism(double epsilon, DiscreteLaplaceSampler sampler)
      : epsilon_(epsilon), sampler_(std::move(sampler)) {}
  double epsilon_;
  DiscreteLaplaceSampler sampler_;
};

// Release of an integer query with L2 sensitivity Delta: value + Z, Z ~ discrete
// Gaussian N_Z(0, sigma^2). Event: DiscreteGaussian(sigma, Delta), in these integer
// units. Accountants treat it as what it is: RDP alpha Delta^2/(2 sigma^2) ((Delta^2 /
// (2 sigma^2))-zCDP, Canonne, Kamath, Steinke 2020, Thm. 4), and the PLD accountant
// uses its exact (lattice-valued) privacy loss, not the continuous Gaussian's.
class DiscreteGaussianMechanism {
 public:
  static absl::StatusOr<DiscreteGaussianMechanism> Create(double sigma,
                                                          int64_t l2_sensitivity);
  int64_t Release(int64_t value, RandomGenerator& rng) const;
  double sigma() const { return sampler_.sigma(); }
  accounting::Event event() const;
  // Half-width from sub-Gaussianity of the discrete Gaussian (it is sigma^2-sub-Gaussian,
  // Canonne, Kamath, Steinke 2020, Sec. 2.4):
  // P(|Z| > k) <= 2 exp(-k^2/(2 sigma^2)). Conservative.
  absl::StatusOr<int64_t> NoiseHalfWidth(double confidence) const;

 private:
  DiscreteGaussianMechanism(int64_t sensitivity, DiscreteGaussianSampler sampler)
      : sensitivity_(sensitivity), sampler_(std::move(sampler)) {}
  int64_t sensitivity_;
  DiscreteGaussianSampler sampler_;
};

// epsilon-DP release of a real-valued query with L1 sensitivity Delta, on the
// lattice G*Z (see the file comment). Noise: G * discrete Laplace with integer scale
// integer_sensitivity/epsilon, i.e. continuous scale at most Delta(1 + 2^-10)/epsilon.
// Event: PureDp(epsilon).
class LaplaceMechanism {
 public:
  static absl::StatusOr<LaplaceMechanism> Create(double epsilon, double l1_sensitivity);
  // Errors (OutOfRange) if value is not finite or |value| / G >= 2^52.
  absl::StatusOr<double> Release(double value, RandomGenerator& rng) const;
  double granularity() const { return granularity_; }
  // The scale of the added noise in output units: G * (integer scale).
  double noise_scale() const { return granularity_ * integer_.scale(); }
  accounting::Event event() const { return integer_.event(); }
  // Half-width of the interval that contains the noise with probability
  // `confidence` (exact for the lattice noise).
  absl::StatusOr<double> NoiseHalfWidth(double confidence) const;

 private:
  LaplaceMechanism(double granularity, DiscreteLaplaceMechanism integer)
      : granularity_(granularity), integer_(std::move(integer)) {}
  double granularity_;
  DiscreteLaplaceMechanism integer_;
};

// Release of a real-valued query with L2 sensitivity Delta and noise stddev sigma
// (from mechanisms/calibration.h), on the lattice G*Z. Event: DiscreteGaussian(sigma_int,
// integer_sensitivity) with sigma_int = sigma / G, the integer mechanism it runs (its
// sigma_int / integer_sensitivity is at most 2^-10 relatively below sigma / Delta).
class GaussianMechanism {
 public:
  static absl::StatusOr<GaussianMechanism> Create(double stddev, double l2_sensitivity);
  absl::StatusOr<double> Release(double value, RandomGenerator& rng) const;
  double granularity() const { return granularity_; }
  accounting::Event event() const { return integer_.event(); }
  absl::StatusOr<double> NoiseHalfWidth(double confidence) const;

 private:
  GaussianMechanism(double granularity, DiscreteGaussianMechanism integer)
      : granularity_(granularity), integer_(std::move(integer)) {}
  double granularity_;
  DiscreteGaussianMechanism integer_;
};

// The lattice granularity for a sensitivity: the largest power of two <=
// sensitivity / 1024. Exposed for tests.
double LatticeGranularity(double sensitivity);

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_ADDITIVE_H_
