// Batch samplers for DP training.
//
// PoissonSample: each of the n examples joins the batch independently with probability q
// — the sampling that the Poisson-subsampled Gaussian accountants (Abadi et al. 2016;
// Mironov, Talwar, Zhang 2019) assume. Its randomness is privacy-relevant (amplification
// by sampling needs the batch to be secret), so trainers pass the SECURE generator.
//
// ShuffledFixedSizeBatches: the conventional "shuffle, then cut into batches of b".
// NOT covered by the Poisson accounting: a ledger must not record its batches as Poisson
// sampled, and trainers using it do not report a certified epsilon.
#ifndef DPKIT_OPTIM_POISSON_SAMPLER_H_
#define DPKIT_OPTIM_POISSON_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "mechanisms/random.h"

namespace dpkit::optim {

// Sorted indices of a Poisson sample of {0, ..., population-1} with rate q in (0, 1].
// May be empty. Cost O(q n) expected: gaps between chosen indices are geometric,
// skip = floor(log U / log(1 - q)) with U uniform in (0, 1] (inverse CDF of Geom(q)).
absl::StatusOr<std::vector<int64_t>> PoissonSample(mechanisms::RandomGenerator& rng,
                                                   int64_t population, double sampling_rate);

// Shuffled fixed-size batches; NOT covered by Poisson accounting (see above).
class ShuffledFixedSizeBatches {
 public:
  // population >= 1, 1 <= batch_size <= population; `seed` fixes the order.
  static absl::StatusOr<ShuffledFixedSizeBatches> Create(int64_t population, int64_t batch_size,
                                                         uint64_t seed);
  // The batches of the next epoch: a fresh permutation cut into floor(n/b) batches.
  std::vector<std::vector<int64_t>> NextEpoch();
  static constexpr bool kCoveredByPoissonAccounting = false;

 private:
  ShuffledFixedSizeBatches(int64_t population, int64_t batch_size, uint64_t seed)
      : population_(population), batch_size_(batch_size), engine_(seed) {}
  int64_t population_, batch_size_;
  std::mt19937_64 engine_;
};

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_POISSON_SAMPLER_H_
