#include "dpkit/optim/poisson_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpkit::optim {

absl::StatusOr<std::vector<int64_t>> PoissonSample(mechanisms::RandomGenerator& rng,
                                                   int64_t population, double sampling_rate) {
  if (population < 1) {
    return absl::InvalidArgumentError(absl::StrCat("population must be >= 1, got ", population));
  }
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate must be in (0, 1], got ", sampling_rate));
  }
  std::vector<int64_t> sample;
  if (sampling_rate == 1) {
    sample.resize(population);
    std::iota(sample.begin(), sample.end(), 0);
    return sample;
  }
  sample.reserve(static_cast<size_t>(population * sampling_rate * 1.2) + 16);
  const double log_keep = std::log1p(-sampling_rate);
  int64_t index = -1;
  while (true) {
    // Number of skipped examples before the next chosen one ~ Geometric(q) on {0,1,...}:
    // P(skip >= k) = (1-q)^k, and floor(log U / log(1-q)) has exactly that law.
    double u = mechanisms::WordToUniformDoubleOpenAtZero(rng.NextUint64());
    double skip = std::floor(std::log(u) / log_keep);
    if (skip >= static_cast<double>(population - index - 1)) break;
    index += static_cast<int64_t>(skip) + 1;
    sample.push_back(index);
  }
  return sample;
}

absl::StatusOr<ShuffledFixedSizeBatches> ShuffledFixedSizeBatches::Create(int64_t population,
                                                                          int64_t batch_size) {
  if (population < 1) {
    return absl::InvalidArgumentError(absl::StrCat("population must be >= 1, got ", population));
  }
  if (batch_size < 1 || batch_size > population) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size must be in [1, population = ", population, "], got ", batch_size));
  }
  return ShuffledFixedSizeBatches(population, batch_size);
}

std::vector<std::vector<int64_t>> ShuffledFixedSizeBatches::NextEpoch(
    mechanisms::RandomGenerator& rng) const {
  std::vector<int64_t> order(population_);
  std::iota(order.begin(), order.end(), 0);
  // Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm 3.4.2P): swap position i with a uniform
  // position in [0, i]; every permutation has probability 1/n!.
  for (int64_t i = population_ - 1; i > 0; --i) {
    uint64_t j = mechanisms::UniformUint64Below(rng, static_cast<uint64_t>(i) + 1);
    std::swap(order[i], order[j]);
  }
  std::vector<std::vector<int64_t>> batches;
  for (int64_t start = 0; start + batch_size_ <= population_; start += batch_size_) {
    batches.emplace_back(order.begin() + start, order.begin() + start + batch_size_);
  }
  return batches;
}

int64_t NumMicrobatches(double expected_batch_size, int64_t microbatch_size) {
  if (microbatch_size < 1) microbatch_size = 1;
  return std::max<int64_t>(1, std::llround(expected_batch_size / microbatch_size));
}

absl::StatusOr<StepRecordSampler> StepRecordSampler::Create(int64_t population,
                                                            int64_t expected_batch_size,
                                                            int64_t microbatch_size,
                                                            bool shuffled) {
  if (microbatch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatch_size must be >= 1, got ", microbatch_size));
  }
  absl::StatusOr<ShuffledFixedSizeBatches> shuffler =
      ShuffledFixedSizeBatches::Create(population, expected_batch_size);
  if (!shuffler.ok()) return shuffler.status();
  const double n = static_cast<double>(population);
  const double b = static_cast<double>(expected_batch_size);
  const int64_t steps_per_epoch = shuffled ? shuffler->batches_per_epoch()
                                           : static_cast<int64_t>(std::ceil(n / b));
  return StepRecordSampler(population, b, steps_per_epoch, microbatch_size,
                           NumMicrobatches(b, microbatch_size), *shuffler, shuffled);
}

int64_t StepRecordSampler::TotalSteps(double epochs) const {
  if (shuffled_) return static_cast<int64_t>(std::ceil(epochs * static_cast<double>(steps_per_epoch_)));
  return static_cast<int64_t>(
      std::ceil(epochs * static_cast<double>(population_) / expected_batch_size_));
}

absl::StatusOr<MicrobatchedBatch> StepRecordSampler::Next(int64_t step,
                                                          mechanisms::RandomGenerator& rng) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("step must be >= 0, got ", step));
  std::vector<int64_t> batch;
  if (shuffled_) {
    if (epoch_batches_.empty() || step % steps_per_epoch_ == 0) {
      epoch_batches_ = shuffler_.NextEpoch(rng);
    }
    batch = epoch_batches_[static_cast<size_t>(step % steps_per_epoch_)];
  } else {
    absl::StatusOr<std::vector<int64_t>> sample = PoissonSample(rng, population_, sampling_rate_);
    if (!sample.ok()) return sample.status();
    batch = *std::move(sample);
  }
  if (microbatch_size_ > 1) return AssignMicrobatches(batch, num_microbatches_, rng.NextUint64());
  MicrobatchedBatch records;
  records.microbatch_sizes.assign(batch.size(), 1);
  records.examples = std::move(batch);
  return records;
}

namespace {
// SplitMix64's output function (Steele, Lea, Flood 2014): a bijection on 64-bit words
// whose outputs for nearby inputs look independent.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

MicrobatchedBatch AssignMicrobatches(const std::vector<int64_t>& batch, int64_t num_microbatches,
                                     uint64_t key) {
  const uint64_t m = static_cast<uint64_t>(std::max<int64_t>(1, num_microbatches));
  std::vector<std::pair<uint64_t, int64_t>> slotted;
  slotted.reserve(batch.size());
  for (int64_t i : batch) slotted.push_back({Mix(static_cast<uint64_t>(i) ^ key) % m, i});
  std::sort(slotted.begin(), slotted.end());
  MicrobatchedBatch out;
  out.examples.reserve(batch.size());
  for (size_t j = 0; j < slotted.size(); ++j) {
    out.examples.push_back(slotted[j].second);
    if (j == 0 || slotted[j].first != slotted[j - 1].first) {
      out.microbatch_sizes.push_back(1);
    } else {
      ++out.microbatch_sizes.back();
    }
  }
  return out;
}

std::vector<PhysicalBatchRange> PhysicalBatchRanges(const std::vector<int64_t>& microbatch_sizes,
                                                    int64_t physical_batch_size) {
  std::vector<PhysicalBatchRange> out;
  int64_t example = 0;
  for (size_t j = 0; j < microbatch_sizes.size(); ++j) {
    const int64_t size = microbatch_sizes[j];
    if (out.empty() || out.back().num_examples + size > physical_batch_size) {
      out.push_back({example, 0, static_cast<int64_t>(j), 0});
    }
    out.back().num_examples += size;
    out.back().num_microbatches += 1;
    example += size;
  }
  return out;
}

}  // namespace dpkit::optim
