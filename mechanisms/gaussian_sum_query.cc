#include "dpkit/mechanisms/gaussian_sum_query.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/mechanisms/gaussian.h"

namespace dpkit::mechanisms {
namespace {

absl::Status CheckPositive(const std::string& name, double value) {
  if (!(std::isfinite(value) && value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be finite and > 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckSizes(const std::vector<size_t>& sizes) {
  if (sizes.empty()) return absl::InvalidArgumentError("group_sizes must not be empty");
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (sizes[j] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("group_sizes[", j, "] must be >= 1, got 0"));
    }
  }
  return absl::OkStatus();
}

double SquaredNorm(absl::Span<const double> v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return s;
}

double ClipFactorOfSquaredNorm(double squared_norm, double clip_norm) {
  const double norm = std::sqrt(squared_norm);
  return norm > clip_norm ? clip_norm / norm : 1.0;
}

}  // namespace

SumQueryNoise IndependentGroupsNoise(const std::vector<double>& clip_norms,
                                     const std::vector<double>& noise_stddevs) {
  SumQueryNoise out;
  out.group_noise_stddevs = noise_stddevs;
  for (size_t j = 0; j < clip_norms.size() && j < noise_stddevs.size(); ++j) {
    out.records.push_back({clip_norms[j], noise_stddevs[j]});
  }
  return out;
}

SumQueryNoise JointGroupsNoise(double clip_norm, double noise_stddev,
                               const std::vector<double>& scales) {
  SumQueryNoise out;
  // McMahan et al. 2018, Sec. 3: noise on the rescaled record, times s_j after rescaling.
  for (double s : scales) out.group_noise_stddevs.push_back(noise_stddev * s);
  out.records.push_back({clip_norm, noise_stddev});
  return out;
}

void IndependentClipFactors(absl::Span<const double> clip_norms,
                            absl::Span<const double> group_squared_norms,
                            absl::Span<double> factors) {
  const size_t n = std::min({clip_norms.size(), group_squared_norms.size(), factors.size()});
  for (size_t j = 0; j < n; ++j) factors[j] = ClipFactorOfSquaredNorm(group_squared_norms[j], clip_norms[j]);
}

void JointClipFactors(double clip_norm, absl::Span<const double> scales,
                      absl::Span<const double> group_squared_norms, absl::Span<double> factors) {
  const size_t n = std::min({scales.size(), group_squared_norms.size(), factors.size()});
  // Norm of the rescaled record (v_j / s_j): sum_j ||v_j||^2 / s_j^2.
  double rescaled = 0;
  for (size_t j = 0; j < n; ++j) rescaled += group_squared_norms[j] / (scales[j] * scales[j]);
  const double f = ClipFactorOfSquaredNorm(rescaled, clip_norm);
  for (size_t j = 0; j < n; ++j) factors[j] = f;
}

absl::StatusOr<GaussianSumQuery> GaussianSumQuery::Flat(std::vector<size_t> group_sizes,
                                                        double clip_norm,
                                                        double noise_multiplier) {
  if (auto s = CheckSizes(group_sizes); !s.ok()) return s;
  if (auto s = CheckPositive("clip_norm", clip_norm); !s.ok()) return s;
  if (auto s = CheckPositive("noise_multiplier", noise_multiplier); !s.ok()) return s;
  const size_t k = group_sizes.size();
  std::vector<double> ones(k, 1.0);
  SumQueryNoise noise = JointGroupsNoise(clip_norm, noise_multiplier * clip_norm, ones);
  return GaussianSumQuery(Mode::kFlat, std::move(group_sizes), {clip_norm},
                          std::move(noise.group_noise_stddevs), std::move(ones),
                          std::move(noise.records));
}

absl::StatusOr<GaussianSumQuery> GaussianSumQuery::PerGroup(
    std::vector<size_t> group_sizes, std::vector<double> clip_norms,
    std::vector<double> noise_multipliers) {
  if (auto s = CheckSizes(group_sizes); !s.ok()) return s;
  if (clip_norms.size() != group_sizes.size() || noise_multipliers.size() != group_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "clip_norms and noise_multipliers need one entry per group (", group_sizes.size(), ")"));
  }
  std::vector<double> stddevs;
  for (size_t j = 0; j < group_sizes.size(); ++j) {
    if (auto s = CheckPositive(absl::StrCat("clip_norms[", j, "]"), clip_norms[j]); !s.ok()) return s;
    if (auto s = CheckPositive(absl::StrCat("noise_multipliers[", j, "]"), noise_multipliers[j]);
        !s.ok()) {
      return s;
    }
    stddevs.push_back(noise_multipliers[j] * clip_norms[j]);
  }
  const size_t k = group_sizes.size();
  SumQueryNoise noise = IndependentGroupsNoise(clip_norms, stddevs);
  return GaussianSumQuery(Mode::kPerGroup, std::move(group_sizes), std::move(clip_norms),
                          std::move(noise.group_noise_stddevs), std::vector<double>(k, 1.0),
                          std::move(noise.records));
}

absl::StatusOr<GaussianSumQuery> GaussianSumQuery::Joint(std::vector<size_t> group_sizes,
                                                         std::vector<double> scales,
                                                         double clip_norm,
                                                         double noise_multiplier) {
  if (auto s = CheckSizes(group_sizes); !s.ok()) return s;
  if (scales.size() != group_sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scales needs one entry per group (", group_sizes.size(), ")"));
  }
  for (size_t j = 0; j < scales.size(); ++j) {
    if (auto s = CheckPositive(absl::StrCat("scales[", j, "]"), scales[j]); !s.ok()) return s;
  }
  if (auto s = CheckPositive("clip_norm", clip_norm); !s.ok()) return s;
  if (auto s = CheckPositive("noise_multiplier", noise_multiplier); !s.ok()) return s;
  SumQueryNoise noise = JointGroupsNoise(clip_norm, noise_multiplier * clip_norm, scales);
  return GaussianSumQuery(Mode::kJoint, std::move(group_sizes), {clip_norm},
                          std::move(noise.group_noise_stddevs), std::move(scales),
                          std::move(noise.records));
}

std::vector<Eigen::VectorXd> GaussianSumQuery::ZeroSums() const {
  std::vector<Eigen::VectorXd> sums;
  for (size_t size : group_sizes_) sums.push_back(Eigen::VectorXd::Zero(size));
  return sums;
}

absl::Status GaussianSumQuery::Accumulate(const RecordGroups& record,
                                          std::vector<Eigen::VectorXd>* sums) const {
  if (record.size() != group_sizes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("record has ", record.size(),
                                                   " groups, the query expects ",
                                                   group_sizes_.size()));
  }
  std::vector<double> squared(record.size());
  for (size_t j = 0; j < record.size(); ++j) {
    if (record[j].size() != group_sizes_[j]) {
      return absl::InvalidArgumentError(absl::StrCat("record group ", j, " has size ",
                                                     record[j].size(), ", expected ",
                                                     group_sizes_[j]));
    }
    squared[j] = SquaredNorm(record[j]);
    if (!std::isfinite(squared[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("record group ", j, " has a non-finite value or norm"));
    }
  }
  // Clip factors: min(1, C / norm) (McMahan et al. 2018, §3); flat is joint with s_j = 1.
  std::vector<double> factor(record.size(), 1.0);
  if (mode_ == Mode::kPerGroup) {
    IndependentClipFactors(clip_norms_, squared, absl::MakeSpan(factor));
  } else {
    JointClipFactors(clip_norms_[0], scales_, squared, absl::MakeSpan(factor));
  }
  for (size_t j = 0; j < record.size(); ++j) {
    (*sums)[j] += factor[j] * Eigen::Map<const Eigen::VectorXd>(record[j].data(), record[j].size());
  }
  return absl::OkStatus();
}

void GaussianSumQuery::AddNoise(RandomGenerator& rng, std::vector<Eigen::VectorXd>* sums) const {
  for (size_t j = 0; j < sums->size(); ++j) {
    AddGaussian(rng, noise_stddevs_[j], (*sums)[j].data(), static_cast<size_t>((*sums)[j].size()));
  }
}

absl::StatusOr<NestedGaussianAverageQuery> NestedGaussianAverageQuery::Create(
    std::vector<std::pair<std::string, GaussianSumQuery>> queries, double sampling_rate,
    double expected_batch_size) {
  if (queries.empty()) return absl::InvalidArgumentError("queries must not be empty");
  if (!(sampling_rate > 0 && sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate must be in (0, 1], got ", sampling_rate));
  }
  if (auto s = CheckPositive("expected_batch_size", expected_batch_size); !s.ok()) return s;
  std::vector<accounting::SumQueryRecord> all;
  for (const auto& [name, query] : queries) {
    all.insert(all.end(), query.records().begin(), query.records().end());
  }
  const accounting::Result<double> z = accounting::CollapsedNoiseMultiplier(all);
  if (!z.ok()) return absl::InvalidArgumentError(z.error());
  return NestedGaussianAverageQuery(std::move(queries), sampling_rate, expected_batch_size, *z);
}

absl::StatusOr<NestedGaussianAverageQuery::Release> NestedGaussianAverageQuery::Run(
    const std::vector<std::vector<RecordGroups>>& records, int64_t step,
    RandomGenerator& rng) const {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("step must be >= 0, got ", step));
  Release release;
  release.sampling_record.step = step;
  release.sampling_record.sampling_rate = sampling_rate_;
  release.collapsed_noise_multiplier = collapsed_noise_multiplier_;
  for (size_t k = 0; k < queries_.size(); ++k) {
    const GaussianSumQuery& query = queries_[k].second;
    std::vector<Eigen::VectorXd> sums = query.ZeroSums();
    for (size_t r = 0; r < records.size(); ++r) {
      if (records[r].size() != queries_.size()) {
        return absl::InvalidArgumentError(absl::StrCat("record ", r, " has ", records[r].size(),
                                                       " parts, expected ", queries_.size()));
      }
      absl::Status status = query.Accumulate(records[r][k], &sums);
      if (!status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("record ", r, ", query '",
                                                       queries_[k].first, "': ",
                                                       status.message()));
      }
    }
    query.AddNoise(rng, &sums);
    for (Eigen::VectorXd& sum : sums) sum /= expected_batch_size_;  // fixed denominator
    release.averages.emplace_back(queries_[k].first, std::move(sums));
    release.sampling_record.queries.insert(release.sampling_record.queries.end(),
                                           query.records().begin(), query.records().end());
  }
  return release;
}

absl::StatusOr<NestedGaussianAverageQuery::Release> NestedGaussianAverageQuery::RunAndRecord(
    const std::vector<std::vector<RecordGroups>>& records, int64_t step, RandomGenerator& rng,
    accounting::LedgerWriter& ledger) const {
  absl::StatusOr<Release> release = Run(records, step, rng);
  if (!release.ok()) return release;
  const accounting::Result<void> appended = ledger.Append(release->sampling_record);
  if (!appended.ok()) return absl::InternalError(appended.error());
  return release;
}

}  // namespace dpkit::mechanisms
