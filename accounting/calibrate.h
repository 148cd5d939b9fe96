// Calibration: the smallest noise multiplier, the largest number of steps or the
// largest sampling rate that meets a privacy budget, for any accountant.
//
// For DP-SGD with Poisson sampling rate q and T steps, CalibrateNoiseMultiplier returns
// a noise multiplier sigma whose epsilon at delta, re-accounted by the chosen
// accountant, is <= target_epsilon (for kPld and kRdp a certified upper bound, so the
// budget is guaranteed), and which is within 0.1 % of the smallest sigma with that
// property: the search keeps an evaluated satisfying end and a failing end and stops when
// they are less than 0.05 % apart. kRdp and kGdp bisect in log(sigma); kPld, whose
// evaluations cost tens of milliseconds, places its points by a log-log model from the
// CLT's answer, with coarse PLD evaluations first (calibrate_search.h: about two coarse and
// two full evaluations instead of 11-17). kGdp uses the CLT approximation of Bu et al. 2020
// (eq. 3.1) and is therefore APPROXIMATE, like every GDP number for DP-SGD.
// LargestSteps and LargestSamplingRate give the same guarantee for the other unknowns.
#ifndef DPKIT_ACCOUNTING_CALIBRATE_H_
#define DPKIT_ACCOUNTING_CALIBRATE_H_

#include <cstdint>

#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

enum class Accountant { kPld, kRdp, kGdp };

// Settings of the accountants behind a calibration.
struct CalibrationOptions {
  // kRdp: how the RDP curve (default orders) becomes epsilon. kImproved: Balle et al.
  // 2020, Thm. 21 (what TF Privacy prints); kOptimal: Asoodeh et al. 2021, the smallest
  // delta consistent with all orders (//accounting:conversions; the default of
  // `dpkit epsilon --accountant=rdp`); kClassic: Mironov 2017, Prop. 3. All certified.
  enum class RdpConversion { kImproved, kOptimal, kClassic };
  RdpConversion rdp_conversion = RdpConversion::kImproved;
  // kPld: grid accuracy (PldEpsilon).
  PldOptions pld;
};

// "pld", "rdp", "gdp".
const char* AccountantName(Accountant accountant);

// epsilon at delta of DpSgdEvent(q, sigma, T) by the accountant: the certified upper
// bound for kPld (PldEpsilon().epsilon_upper) and kRdp (options.rdp_conversion), the
// CLT value for kGdp.
Result<double> DpSgdEpsilon(double sampling_rate, double noise_multiplier, int64_t steps,
                            double delta, Accountant accountant,
                            const CalibrationOptions& options = {});

struct Calibration {
  double noise_multiplier;
  double epsilon;  // epsilon of the returned noise multiplier (<= target)
};

// target_epsilon finite > 0, delta in (0, 1), sampling_rate in (0, 1], steps >= 1.
// Errors when no noise multiplier in [1e-3, 1e4] meets the target.
Result<Calibration> CalibrateNoiseMultiplier(double target_epsilon, double delta,
                                             double sampling_rate, int64_t steps,
                                             Accountant accountant,
                                             const CalibrationOptions& options = {});

// The same for T steps of sampling without replacement under replace-one adjacency,
// SelfComposed(SampledWithoutReplacement(population, sample_size, Gaussian(sigma)), steps)
// (a trainer's fixed-size steps, whose sigma is its noise multiplier / 2): kRdp the bound of
// Wang, Balle, Kasiviswanathan 2019 (options.rdp_conversion), bisected in log(sigma); kPld
// PLD's certified upper bound (pld.h, replace-one), a model-guided search (calibrate_search.h)
// from the RDP answer. kGdp is an error (GDP does not account this event). The same
// guarantee as CalibrateNoiseMultiplier: re-accounted, the answer meets the target, and it is
// within 0.1 % of the smallest sigma that does. 1 <= sample_size <= population, steps >= 1.
Result<Calibration> CalibrateWithoutReplacementNoiseMultiplier(
    double target_epsilon, double delta, int64_t population, int64_t sample_size,
    int64_t steps, Accountant accountant, const CalibrationOptions& options = {});

// The largest number of steps T <= max_steps with epsilon(q, sigma, T) <= target_epsilon,
// and that epsilon. Guarantee: T re-accounted meets the target and, unless T == max_steps,
// T + 1 does not (the search keeps a satisfying and a failing end one step apart).
// steps == 0 (epsilon = +inf) when even one step exceeds the target.
// noise_multiplier finite > 0, max_steps >= 1. An exponential search from T = 1 brackets
// the answer first, so large max_steps cost only about 2 log2(T) evaluations (kPld: the
// model-guided search of calibrate_search.h from the CLT's answer, about two coarse and
// three full evaluations).
struct StepsCalibration {
  int64_t steps;
  double epsilon;  // epsilon of `steps` steps (<= target); +inf when steps == 0
};
Result<StepsCalibration> LargestSteps(double target_epsilon, double delta,
                                      double sampling_rate, double noise_multiplier,
                                      int64_t max_steps, Accountant accountant,
                                      const CalibrationOptions& options = {});

// The largest Poisson sampling rate q in (0, 1] with epsilon(q, sigma, T) <= target.
// The number of steps is either fixed (`steps`) or follows from a number of epochs,
// T = ceil(epochs / q) (LargestSamplingRateForEpochs). Guarantee: the returned q
// re-accounted meets the target and, unless q == 1, q * (1 + 0.1 %) does not (a
// bisection in log(q) stopped at a bracket narrower than 0.05 %). Errors when no
// q >= 1e-12 meets the target.
struct SamplingRateCalibration {
  double sampling_rate;
  int64_t steps;   // T at the returned q
  double epsilon;  // epsilon of the returned q (<= target)
};
Result<SamplingRateCalibration> LargestSamplingRate(double target_epsilon, double delta,
                                                    double noise_multiplier, int64_t steps,
                                                    Accountant accountant,
                                                    const CalibrationOptions& options = {});
Result<SamplingRateCalibration> LargestSamplingRateForEpochs(
    double target_epsilon, double delta, double noise_multiplier, double epochs,
    Accountant accountant, const CalibrationOptions& options = {});

// sigma~ of Bu, Dong, Long, Su 2020, eqs. (3.3)-(3.4), from the certified PLD instead
// of the moments accountant. The paper takes the epsilon that the moments accountant
// reports for (q, sigma, T) at delta, finds the mu with mu-GDP exactly (epsilon,
// delta)-DP (eq. 3.3, solving eq. 3.2 for mu), and solves mu_CLT(sigma~) = mu, i.e.
// sigma~ = 1 / sqrt(log(1 + mu^2 / (q^2 T))) (eq. 3.4 with eq. 3.1): the noise
// multiplier with which the CLT would claim the same (epsilon, delta). Here the
// epsilon is PldEpsilon's certified interval [epsilon_lower, epsilon_upper], which
// brackets the exact epsilon of (q, sigma, T); since sigma~ decreases in epsilon, the
// sigma~ of the exact epsilon lies in [noise_multiplier, noise_multiplier_upper].
// sigma~ is a statement about the CLT (an APPROXIMATION), not a privacy guarantee.
struct CltEquivalentNoise {
  double epsilon_upper, epsilon_lower;  // certified PLD bounds for (q, sigma, T, delta)
  double mu;                            // eq. (3.3) at epsilon_upper
  double noise_multiplier;              // sigma~ at epsilon_upper: the lower end
  double noise_multiplier_upper;        // sigma~ at epsilon_lower: the upper end
};
Result<CltEquivalentNoise> CltEquivalentNoiseMultiplier(double sampling_rate,
                                                        double noise_multiplier,
                                                        int64_t steps, double delta,
                                                        const PldOptions& options = {});

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_CALIBRATE_H_
