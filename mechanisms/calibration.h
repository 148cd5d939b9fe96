// Noise calibration: how much Laplace or Gaussian noise a privacy target needs,
// and confidence intervals for that noise.
//
// All functions validate their input and return absl::InvalidArgumentError with a
// message naming the parameter and its range.
#ifndef DPKIT_MECHANISMS_CALIBRATION_H_
#define DPKIT_MECHANISMS_CALIBRATION_H_

#include "absl/status/statusor.h"

namespace dpkit::mechanisms {

// Laplace scale b = Delta_1 / epsilon for epsilon-DP (Dwork, McSherry, Nissim,
// Smith 2006; Dwork & Roth 2014, Thm. 3.6). epsilon, l1_sensitivity finite > 0.
absl::StatusOr<double> LaplaceScaleForEpsilon(double epsilon, double l1_sensitivity);

// Classic Gaussian mechanism: sigma = Delta_2 sqrt(2 ln(1.25/delta)) / epsilon,
// (epsilon, delta)-DP only for epsilon in (0, 1) (Dwork & Roth 2014, Thm. A.1);
// epsilon >= 1 is an error (use accounting::AnalyticGaussianStddev). delta in (0, 1).
absl::StatusOr<double> ClassicGaussianStddev(double epsilon, double delta,
                                             double l2_sensitivity);

// The analytic Gaussian mechanism's calibration (Balle & Wang 2018) is
// accounting::AnalyticGaussianStddev (accounting/gdp.h): it is the GDP conversion of
// Bu et al. 2020, eq. (3.2), and mechanisms/ uses accounting's events only.

// Gaussian mechanism for mu-GDP: sigma = Delta_2 / mu (Dong, Roth, Su 2019, Thm. 2.7).
absl::StatusOr<double> GdpGaussianStddev(double mu, double l2_sensitivity);

// sigma = noise_multiplier * l2_sensitivity (DP-SGD: noise_multiplier * clip_norm).
absl::StatusOr<double> GaussianStddevFromNoiseMultiplier(double noise_multiplier,
                                                         double l2_sensitivity);

// Half-width t of a two-sided interval that contains the noise with probability
// `confidence` in (0, 1): a released value y satisfies |y - true value| <= t with
// that probability (before rounding to the mechanism's lattice).
// Laplace: P(|X| > t) = exp(-t/b)  =>  t = b ln(1/(1 - confidence)).
absl::StatusOr<double> LaplaceNoiseHalfWidth(double scale, double confidence);
// Gaussian: t = sigma Phi^{-1}((1 + confidence)/2).
absl::StatusOr<double> GaussianNoiseHalfWidth(double stddev, double confidence);

}  // namespace dpkit::mechanisms

#endif  // DPKIT_MECHANISMS_CALIBRATION_H_
