#include "dpkit/mechanisms/calibration.h"

#include <cmath>

#include <boost/math/distributions/normal.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpkit::mechanisms {
namespace {

absl::Status CheckPositive(const char* name, double value) {
  if (!(std::isfinite(value) && value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be finite and > 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckOpenUnit(const char* name, double value) {
  if (!(value > 0 && value < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be in (0, 1), got ", value));
  }
  return absl::OkStatus();
}

#define DPKIT_MECH_RETURN_IF_ERROR(expr)       \
  do {                                         \
    absl::Status dpkit_status_ = (expr);       \
    if (!dpkit_status_.ok()) return dpkit_status_; \
  } while (false)

absl::StatusOr<double> FiniteOrError(double value, const char* what) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not representable as a finite double for these parameters"));
  }
  return value;
}

}  // namespace

absl::StatusOr<double> LaplaceScaleForEpsilon(double epsilon, double l1_sensitivity) {
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("epsilon", epsilon));
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("l1_sensitivity", l1_sensitivity));
  return FiniteOrError(l1_sensitivity / epsilon, "Laplace scale");
}

absl::StatusOr<double> ClassicGaussianStddev(double epsilon, double delta,
                                             double l2_sensitivity) {
  if (!(epsilon > 0 && epsilon < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon must be in (0, 1) for the classic Gaussian mechanism (use the analytic "
        "calibration otherwise), got ",
        epsilon));
  }
  DPKIT_MECH_RETURN_IF_ERROR(CheckOpenUnit("delta", delta));
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("l2_sensitivity", l2_sensitivity));
  // Dwork & Roth 2014, Thm. A.1.
  return FiniteOrError(l2_sensitivity * std::sqrt(2.0 * std::log(1.25 / delta)) / epsilon,
                       "Gaussian stddev");
}

absl::StatusOr<double> GdpGaussianStddev(double mu, double l2_sensitivity) {
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("mu", mu));
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("l2_sensitivity", l2_sensitivity));
  return FiniteOrError(l2_sensitivity / mu, "Gaussian stddev");
}

absl::StatusOr<double> GaussianStddevFromNoiseMultiplier(double noise_multiplier,
                                                         double l2_sensitivity) {
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("noise_multiplier", noise_multiplier));
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("l2_sensitivity", l2_sensitivity));
  return FiniteOrError(noise_multiplier * l2_sensitivity, "Gaussian stddev");
}

absl::StatusOr<double> LaplaceNoiseHalfWidth(double scale, double confidence) {
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("scale", scale));
  DPKIT_MECH_RETURN_IF_ERROR(CheckOpenUnit("confidence", confidence));
  return FiniteOrError(-scale * std::log1p(-confidence), "half-width");
}

absl::StatusOr<double> GaussianNoiseHalfWidth(double stddev, double confidence) {
  DPKIT_MECH_RETURN_IF_ERROR(CheckPositive("stddev", stddev));
  DPKIT_MECH_RETURN_IF_ERROR(CheckOpenUnit("confidence", confidence));
  // Upper (1 - confidence)/2 quantile, taken as a complement for accuracy near 1.
  const double z = boost::math::quantile(boost::math::complement(
      boost::math::normal_distribution<double>(0.0, 1.0), (1.0 - confidence) / 2.0));
  return FiniteOrError(stddev * z, "half-width");
}

}  // namespace dpkit::mechanisms
