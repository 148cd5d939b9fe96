#include "dpkit/optim/fixed_size_sampler.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpkit::optim {

absl::StatusOr<std::vector<int64_t>> FixedSizeSample(mechanisms::RandomGenerator& rng,
                                                     int64_t population, int64_t sample_size) {
  if (population < 1) {
    return absl::InvalidArgumentError(absl::StrCat("population must be >= 1, got ", population));
  }
  if (sample_size < 1 || sample_size > population) {
    return absl::InvalidArgumentError(absl::StrCat("sample_size must be in [1, population = ",
                                                   population, "], got ", sample_size));
  }
  // Floyd's algorithm: for j = n - m, ..., n - 1 draw t uniform in {0, ..., j}; insert t,
  // or j when t is already in. Every m-subset comes out with probability 1 / C(n, m).
  std::unordered_set<int64_t> chosen;
  chosen.reserve(static_cast<size_t>(sample_size) * 2);
  std::vector<int64_t> sample;
  sample.reserve(static_cast<size_t>(sample_size));
  for (int64_t j = population - sample_size; j < population; ++j) {
    const auto t = static_cast<int64_t>(
        mechanisms::UniformUint64Below(rng, static_cast<uint64_t>(j) + 1));
    const int64_t pick = chosen.insert(t).second ? t : j;
    if (pick == j) chosen.insert(j);
    sample.push_back(pick);
  }
  std::sort(sample.begin(), sample.end());
  return sample;
}

absl::StatusOr<accounting::LedgerEntry> FixedSizeSampleEntry(
    int64_t population, int64_t sample_size,
    const std::vector<accounting::SumQueryRecord>& queries) {
  // Replace-one: a changed record moves each clipped sum by up to 2 C_i, i.e. the query
  // at clip norm 2 C_i and the same noise (McMahan et al. 2018, eq. 1).
  std::vector<accounting::SumQueryRecord> replace_one(queries);
  for (accounting::SumQueryRecord& q : replace_one) q.clip_norm *= 2;
  auto z = accounting::CollapsedNoiseMultiplier(replace_one);
  if (!z.ok()) return absl::InvalidArgumentError(z.error());
  auto gaussian = accounting::Event::Gaussian(*z);
  if (!gaussian.ok()) return absl::InvalidArgumentError(gaussian.error());
  auto event = accounting::Event::SampledWithoutReplacement(population, sample_size, *gaussian);
  if (!event.ok()) return absl::InvalidArgumentError(event.error());
  return accounting::LedgerEntry{*event};
}

}  // namespace dpkit::optim
