// Laplace noise samples: density exp(-|x|/b) / (2b).
//
// These are raw floating-point samples (for `dpkit sample`, benchmarks and
// simulations). To RELEASE a noisy statistic use LaplaceMechanism
// (mechanisms/additive.h), whose output lies on a lattice so that its low bits do not
// reveal the input (Mironov 2012).
#ifndef DPKIT_MECHANISMS_LAPLACE_H_
#define DPKIT_MECHANISMS_LAPLACE_H_

#include <cstddef>

#include "dpkit/mechanisms/random.h"

namespace dpkit::mechanisms {

// One Lap(scale) sample; scale finite >= 0. Inversion: x = -b ln(U) with U
// uniform in (0, 1] and an independent random sign (one 64-bit word per sample:
// bit 0 is the sign, the top 53 bits give U).
double SampleLaplace(RandomGenerator& rng, double scale);

// Writes n i.i.d. Lap(scale) samples.
void FillLaplace(RandomGenerator& rng, double scale, double* out, size_t n);

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_LAPLACE_H_
