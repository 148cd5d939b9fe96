#include "dpkit/mechanisms/additive.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/mechanisms/event_or_die.h"

namespace dpkit::mechanisms {
namespace {

absl::Status CheckConfidence(double confidence) {
  if (!(confidence > 0 && confidence < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("confidence must be in (0, 1), got ", confidence));
  }
  return absl::OkStatus();
}

// round(value / G) as an integer, or OutOfRange when it does not fit 2^52.
absl::StatusOr<int64_t> ToLattice(double value, double granularity) {
  if (!std::isfinite(value)) {
    return absl::OutOfRangeError(absl::StrCat("value must be finite, got ", value));
  }
  const double scaled = std::nearbyint(value / granularity);
  if (!(std::fabs(scaled) < 0x1.0p52)) {
    return absl::OutOfRangeError(absl::StrCat("value ", value,
                                              " is too large for the mechanism's lattice "
                                              "granularity ",
                                              granularity, " (|value| / granularity >= 2^52)"));
  }
  return static_cast<int64_t>(scaled);
}

absl::StatusOr<double> FromLattice(int64_t k, double granularity) {
  if (k > (int64_t{1} << 53) || k < -(int64_t{1} << 53)) {
    return absl::OutOfRangeError("noisy value exceeds the exactly representable lattice range");
  }
  return static_cast<double>(k) * granularity;  // exact: |k| <= 2^53, G a power of two
}

absl::StatusOr<int64_t> IntegerSensitivity(double sensitivity, double granularity) {
  return static_cast<int64_t>(std::floor(sensitivity / granularity)) + 1;
}

}  // namespace

double LatticeGranularity(double sensitivity) {
  int exponent = 0;
  std::frexp(sensitivity, &exponent);  // sensitivity in [2^(e-1), 2^e)
  return std::ldexp(1.0, exponent - 1 - 10);
}

absl::StatusOr<DiscreteLaplaceMechanism> DiscreteLaplaceMechanism::Create(
    double epsilon, int64_t l1_sensitivity) {
  if (!(std::isfinite(epsilon) && epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be finite and > 0, got ", epsilon));
  }
  if (l1_sensitivity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("l1_sensitivity must be an integer >= 1, got ", l1_sensitivity));
  }
  auto sampler = DiscreteLaplaceSampler::Create(static_cast<double>(l1_sensitivity) / epsilon);
  if (!sampler.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon ", epsilon, " with sensitivity ", l1_sensitivity,
        " gives a noise scale outside (0, 2^50]: ", sampler.status().message()));
  }
  return DiscreteLaplaceMechanism(epsilon, *std::move(sampler));
}

int64_t DiscreteLaplaceMechanism::Release(int64_t value, RandomGenerator& rng) const {
  return value + sampler_.Sample(rng);
}

accounting::Event DiscreteLaplaceMechanism::event() const {
  return EventOrDie(accounting::Event::PureDp(epsilon_));
}

absl::StatusOr<int64_t> DiscreteLaplaceMechanism::NoiseHalfWidth(double confidence) const {
  absl::Status status = CheckConfidence(confidence);
  if (!status.ok()) return status;
  const double b = scale();
  // Solve 2 e^{-(k+1)/b} / (1 + e^{-1/b}) <= 1 - confidence for the smallest k >= 0.
  const double k = std::ceil(b * std::log(2.0 / ((1.0 - confidence) * (1.0 + std::exp(-1.0 / b)))) - 1.0);
  return static_cast<int64_t>(std::max(0.0, k));
}

absl::StatusOr<DiscreteGaussianMechanism> DiscreteGaussianMechanism::Create(
    double sigma, int64_t l2_sensitivity) {
  if (l2_sensitivity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("l2_sensitivity must be an integer >= 1, got ", l2_sensitivity));
  }
  auto sampler = DiscreteGaussianSampler::Create(sigma);
  if (!sampler.ok()) return sampler.status();
  return DiscreteGaussianMechanism(l2_sensitivity, *std::move(sampler));
}

int64_t DiscreteGaussianMechanism::Release(int64_t value, RandomGenerator& rng) const {
  return value + sampler_.Sample(rng);
}

accounting::Event DiscreteGaussianMechanism::event() const {
  return EventOrDie(accounting::Event::DiscreteGaussian(sigma(), sensitivity_));
}

absl::StatusOr<int64_t> DiscreteGaussianMechanism::NoiseHalfWidth(double confidence) const {
  absl::Status status = CheckConfidence(confidence);
  if (!status.ok()) return status;
  return static_cast<int64_t>(
      std::ceil(sigma() * std::sqrt(2.0 * std::log(2.0 / (1.0 - confidence)))));
}

absl::StatusOr<LaplaceMechanism> LaplaceMechanism::Create(double epsilon,
                                                          double l1_sensitivity) {
  if (!(std::isfinite(l1_sensitivity) && l1_sensitivity > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("l1_sensitivity must be finite and > 0, got ", l1_sensitivity));
  }
  const double granularity = LatticeGranularity(l1_sensitivity);
  auto integer_sensitivity = IntegerSensitivity(l1_sensitivity, granularity);
  auto integer = DiscreteLaplaceMechanism::Create(epsilon, *integer_sensitivity);
  if (!integer.ok()) return integer.status();
  return LaplaceMechanism(granularity, *std::move(integer));
}

absl::StatusOr<double> LaplaceMechanism::Release(double value, RandomGenerator& rng) const {
  auto r = ToLattice(value, granularity_);
  if (!r.ok()) return r.status();
  return FromLattice(integer_.Release(*r, rng), granularity_);
}

absl::StatusOr<double> LaplaceMechanism::NoiseHalfWidth(double confidence) const {
  auto k = integer_.NoiseHalfWidth(confidence);
  if (!k.ok()) return k.status();
  return static_cast<double>(*k) * granularity_;
}

absl::StatusOr<GaussianMechanism> GaussianMechanism::Create(double stddev,
                                                            double l2_sensitivity) {
  if (!(std::isfinite(l2_sensitivity) && l2_sensitivity > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("l2_sensitivity must be finite and > 0, got ", l2_sensitivity));
  }
  if (!(std::isfinite(stddev) && stddev > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stddev must be finite and > 0, got ", stddev));
  }
  const double granularity = LatticeGranularity(l2_sensitivity);
  auto integer_sensitivity = IntegerSensitivity(l2_sensitivity, granularity);
  auto integer = DiscreteGaussianMechanism::Create(stddev / granularity, *integer_sensitivity);
  if (!integer.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stddev / l2_sensitivity is outside the supported range (sigma on the lattice must be "
        "in (0, 2^40]): ",
        integer.status().message()));
  }
  return GaussianMechanism(granularity, *std::move(integer));
}

absl::StatusOr<double> GaussianMechanism::Release(double value, RandomGenerator& rng) const {
  auto r = ToLattice(value, granularity_);
  if (!r.ok()) return r.status();
  return FromLattice(integer_.Release(*r, rng), granularity_);
}

absl::StatusOr<double> GaussianMechanism::NoiseHalfWidth(double confidence) const {
  auto k = integer_.NoiseHalfWidth(confidence);
  if (!k.ok()) return k.status();
  return static_cast<double>(*k) * granularity_;
}

}  // namespace dpkit::mechanisms
