#include "optim/poisson_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
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
                                                                          int64_t batch_size,
                                                                          uint64_t seed) {
  if (population < 1 || batch_size < 1 || batch_size > population) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size must be in [1, population = ", population, "], got ", batch_size));
  }
  return ShuffledFixedSizeBatches(population, batch_size, seed);
}

std::vector<std::vector<int64_t>> ShuffledFixedSizeBatches::NextEpoch() {
  std::vector<int64_t> order(population_);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), engine_);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t start = 0; start + batch_size_ <= population_; start += batch_size_) {
    batches.emplace_back(order.begin() + start, order.begin() + start + batch_size_);
  }
  return batches;
}

}  // namespace dpkit::optim
