// Fixed-size sampling without replacement: each step's batch is a uniformly random subset
// of exactly m of the n records (McMahan et al. 2018's "sampling policies"; the sampler
// whose privacy Wang, Balle, Kasiviswanathan 2019 analyse).
//
// Its accounting differs from Poisson sampling's in two ways, both recorded in the ledger
// entry below: the batch size is fixed (so the sum query can be averaged by m exactly),
// and the neighbouring relation is REPLACE-ONE (a dataset of the same size with one
// record changed), under which the sampled Gaussian's RDP is the bound of Wang et al.
// 2019, Thm. 9 (accounting/rdp.h, SampledWithoutReplacement) and its PLD is bounded through
// Dong, Roth, Su 2019's C_p(f) (accounting/pld.h). With clip norm C a replaced
// record moves the sum by up to 2C, so the Gaussian's noise multiplier in the event is
// noise_stddev / (2C) for the replace-one relation.
//
// The subset's randomness is privacy-relevant (amplification needs it secret): trainers
// pass the SECURE generator, tests a ...ForTesting one.
#ifndef DPKIT_OPTIM_FIXED_SIZE_SAMPLER_H_
#define DPKIT_OPTIM_FIXED_SIZE_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::optim {

// Sorted indices of a uniformly random subset of sample_size of {0, ..., population-1}:
// Floyd's algorithm (Bentley & Floyd 1987, "A sample of brilliance"), sample_size
// unbiased integer draws. population >= 1, 1 <= sample_size <= population.
absl::StatusOr<std::vector<int64_t>> FixedSizeSample(mechanisms::RandomGenerator& rng,
                                                     int64_t population, int64_t sample_size);

// The ledger entry of one fixed-size step running Gaussian sum queries (clip norm C_i,
// noise standard deviation s_i) on its sample: the event
// SampledWithoutReplacement(population, sample_size, Gaussian(z)) with the replace-one
// noise multiplier z = (sum_i (2 C_i / s_i)^2)^{-1/2} (McMahan et al. 2018, eq. 1, at
// sensitivity 2 C_i). Errors: as accounting::CollapsedNoiseMultiplier and the event's
// factories.
absl::StatusOr<accounting::LedgerEntry> FixedSizeSampleEntry(
    int64_t population, int64_t sample_size,
    const std::vector<accounting::SumQueryRecord>& queries);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_FIXED_SIZE_SAMPLER_H_
