// Batch samplers for DP training.
//
// PoissonSample: each of the n examples joins the batch independently with probability q
// — the sampling that the Poisson-subsampled Gaussian accountants (Abadi et al. 2016;
// Mironov, Talwar, Zhang 2019) assume. Its randomness is privacy-relevant (amplification
// by sampling needs the batch to be secret), so trainers pass the SECURE generator.
//
// ShuffledFixedSizeBatches: the conventional "shuffle, then cut into batches of b".
// NOT covered by the Poisson accounting: a ledger must not record its batches as Poisson
// sampled, and trainers using it do not report a certified epsilon. Its permutation is
// drawn from the generator passed to NextEpoch (trainers pass the secure one, so that batch
// composition stays secret like a Poisson sample's; tests pass a ...ForTesting one).
//
// Microbatches (a record = the average gradient of the examples of one microbatch, see
// optim/clipping.h): AssignMicrobatches groups a batch into microbatches so that the
// microbatch of an example depends only on its own index and a per-step key drawn
// independently of the data, never on which other examples are in the batch. That is what
// makes adding or removing one example change exactly one microbatch's record (sensitivity
// 2C); cutting the sorted batch into consecutive runs of k would shift every later
// microbatch and change up to all of them. PhysicalBatchRanges then packs whole
// microbatches into physical batches (a microbatch is never split, so its norm can be
// computed in one pass); splitting never changes what is clipped, summed or noised.
#ifndef DPKIT_OPTIM_POISSON_SAMPLER_H_
#define DPKIT_OPTIM_POISSON_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dpkit/mechanisms/random.h"

namespace dpkit::optim {

// Sorted indices of a Poisson sample of {0, ..., population-1} with rate q in (0, 1].
// May be empty. Cost O(q n) expected: gaps between chosen indices are geometric,
// skip = floor(log U / log(1 - q)) with U uniform in (0, 1] (inverse CDF of Geom(q)).
absl::StatusOr<std::vector<int64_t>> PoissonSample(mechanisms::RandomGenerator& rng,
                                                   int64_t population, double sampling_rate);

// Shuffled fixed-size batches; NOT covered by Poisson accounting (see above).
class ShuffledFixedSizeBatches {
 public:
  // population >= 1, 1 <= batch_size <= population.
  static absl::StatusOr<ShuffledFixedSizeBatches> Create(int64_t population, int64_t batch_size);
  // The batches of the next epoch: a uniformly random permutation (Fisher-Yates with
  // unbiased integers from `rng`) cut into floor(n/b) batches; the last n mod b examples
  // of the permutation sit this epoch out.
  std::vector<std::vector<int64_t>> NextEpoch(mechanisms::RandomGenerator& rng) const;
  int64_t batches_per_epoch() const { return population_ / batch_size_; }
  static constexpr bool kCoveredByPoissonAccounting = false;

 private:
  ShuffledFixedSizeBatches(int64_t population, int64_t batch_size)
      : population_(population), batch_size_(batch_size) {}
  int64_t population_, batch_size_;
};

// The number M of microbatch slots per step for expected batch size B and microbatch size
// k >= 1: max(1, round(B / k)). Averages over microbatches divide by this fixed M (as
// averages over examples divide by B, never by a realised count).
int64_t NumMicrobatches(double expected_batch_size, int64_t microbatch_size);

// A batch reordered so that each microbatch is a run of consecutive examples.
struct MicrobatchedBatch {
  std::vector<int64_t> examples;          // the batch's indices, grouped by microbatch
  std::vector<int64_t> microbatch_sizes;  // sizes of the non-empty microbatches, in order
};

// Example i goes to slot hash(i, key) mod num_microbatches (a SplitMix64 finaliser of
// i xor key); empty slots are dropped. `key` is drawn fresh per step (it varies which
// examples share a microbatch); any fixed key keeps the sensitivity argument above.
MicrobatchedBatch AssignMicrobatches(const std::vector<int64_t>& batch, int64_t num_microbatches,
                                     uint64_t key);

// Each training step's records, as the trainers draw them: a Poisson sample of rate
// q = B/n (or, when `shuffled`, the next batch of a uniformly random permutation drawn at
// each epoch start and on the first call, e.g. after a resume: not covered by the Poisson
// accounting), grouped by AssignMicrobatches with a fresh per-step key when
// microbatch_size > 1 (otherwise each example is its own record). Every draw comes from
// the generator passed to Next (trainers pass the secure one).
class StepRecordSampler {
 public:
  // population >= 1, 1 <= expected_batch_size <= population, microbatch_size >= 1.
  static absl::StatusOr<StepRecordSampler> Create(int64_t population,
                                                  int64_t expected_batch_size,
                                                  int64_t microbatch_size, bool shuffled);
  // The records of step `step` (0-based over the whole run; the shuffled loader starts a
  // new permutation where step is a multiple of steps_per_epoch()).
  absl::StatusOr<MicrobatchedBatch> Next(int64_t step, mechanisms::RandomGenerator& rng);
  // Poisson: ceil(n / B) steps per epoch (n / B in expectation); shuffled: floor(n / B).
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // Steps for `epochs` (>= 0) passes: Poisson ceil(epochs n / B); shuffled
  // ceil(epochs floor(n / B)).
  int64_t TotalSteps(double epochs) const;
  double sampling_rate() const { return sampling_rate_; }
  int64_t num_microbatches() const { return num_microbatches_; }

 private:
  StepRecordSampler(int64_t population, double expected_batch_size, int64_t steps_per_epoch,
                    int64_t microbatch_size, int64_t num_microbatches,
                    ShuffledFixedSizeBatches shuffler, bool shuffled)
      : population_(population), expected_batch_size_(expected_batch_size),
        sampling_rate_(expected_batch_size / static_cast<double>(population)),
        steps_per_epoch_(steps_per_epoch), microbatch_size_(microbatch_size),
        num_microbatches_(num_microbatches), shuffler_(shuffler), shuffled_(shuffled) {}
  int64_t population_;
  double expected_batch_size_, sampling_rate_;
  int64_t steps_per_epoch_, microbatch_size_, num_microbatches_;
  ShuffledFixedSizeBatches shuffler_;
  bool shuffled_;
  std::vector<std::vector<int64_t>> epoch_batches_;  // shuffled: the current epoch's
};

// Consecutive ranges of microbatches whose total size is <= physical_batch_size, except a
// single microbatch larger than that, which gets a range of its own.
struct PhysicalBatchRange {
  int64_t first_example, num_examples;        // into MicrobatchedBatch::examples
  int64_t first_microbatch, num_microbatches; // into MicrobatchedBatch::microbatch_sizes
};
std::vector<PhysicalBatchRange> PhysicalBatchRanges(const std::vector<int64_t>& microbatch_sizes,
                                                    int64_t physical_batch_size);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_POISSON_SAMPLER_H_
