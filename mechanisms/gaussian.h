// Fast bulk Gaussian noise (DP-SGD adds one draw per model parameter per step).
//
// Samples are produced by the 256-layer Ziggurat method (Marsaglia & Tsang 2000,
// "The Ziggurat Method for Generating Random Variables", with the independent-bit
// layout of Doornik 2005, "An Improved Ziggurat Method"), consuming about 1.02
// 64-bit words per sample. The layer boundaries are computed at start-up to double
// precision by a root search (see gaussian.cc), so the sampler is exact up to the
// rounding of doubles.
//
// Note: floating-point Gaussian noise added to a floating-point value is what
// DP-SGD has always done; for releasing a single statistic use the snapped or
// discrete mechanisms (mechanisms/snapping.h, mechanisms/discrete.h), whose low bits
// do not leak the input.
#ifndef DPKIT_MECHANISMS_GAUSSIAN_H_
#define DPKIT_MECHANISMS_GAUSSIAN_H_

#include <cstddef>

#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

// Writes n i.i.d. N(0, stddev^2) samples to out. stddev must be finite and >= 0
// (0 writes zeros); callers validate user input before (see noise.h).
void FillGaussian(RandomGenerator& rng, double stddev, float* out, size_t n);
void FillGaussian(RandomGenerator& rng, double stddev, double* out, size_t n);

// Adds n i.i.d. N(0, stddev^2) samples to out[0..n) in place (noisy sums).
void AddGaussian(RandomGenerator& rng, double stddev, float* out, size_t n);
void AddGaussian(RandomGenerator& rng, double stddev, double* out, size_t n);

// One standard normal sample.
double StandardGaussian(RandomGenerator& rng);

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_GAUSSIAN_H_
