// Calibration: the smallest noise multiplier that meets a privacy budget.
//
// For DP-SGD with Poisson sampling rate q and T steps, CalibrateNoiseMultiplier returns
// a noise multiplier sigma whose epsilon at delta, re-accounted by the chosen
// accountant, is <= target_epsilon (for kPld and kRdp a certified upper bound, so the
// budget is guaranteed), and which is within 0.1 % of the smallest sigma with that
// property: a bisection in log(sigma) that keeps the satisfying end and stops when the
// bracket is narrower than 0.05 %. kGdp uses the CLT approximation of Bu et al. 2020
// (eq. 3.1) and is therefore APPROXIMATE, like every GDP number for DP-SGD.
#ifndef DPKIT_ACCOUNTING_CALIBRATE_H_
#define DPKIT_ACCOUNTING_CALIBRATE_H_

#include <cstdint>

#include "accounting/result.h"

namespace dpkit::accounting {

enum class Accountant { kPld, kRdp, kGdp };

// "pld", "rdp", "gdp".
const char* AccountantName(Accountant accountant);

// epsilon at delta of DpSgdEvent(q, sigma, T) by the accountant: the certified upper
// bound for kPld (PldEpsilon().epsilon_upper) and kRdp (improved conversion), the CLT
// value for kGdp.
Result<double> DpSgdEpsilon(double sampling_rate, double noise_multiplier, int64_t steps,
                            double delta, Accountant accountant);

struct Calibration {
  double noise_multiplier;
  double epsilon;  // epsilon of the returned noise multiplier (<= target)
};

// target_epsilon finite > 0, delta in (0, 1), sampling_rate in (0, 1], steps >= 1.
// Errors when no noise multiplier in [1e-3, 1e4] meets the target.
Result<Calibration> CalibrateNoiseMultiplier(double target_epsilon, double delta,
                                             double sampling_rate, int64_t steps,
                                             Accountant accountant);

// The largest number of steps (<= max_steps) whose epsilon stays <= target_epsilon;
// 0 when even one step exceeds it.
Result<int64_t> LargestSteps(double target_epsilon, double delta, double sampling_rate,
                             double noise_multiplier, int64_t max_steps,
                             Accountant accountant);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_CALIBRATE_H_
