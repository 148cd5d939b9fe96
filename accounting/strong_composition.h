// Strong-composition accountant for DP-SGD: the analysis the moments accountant
// replaced (Abadi et al. 2016, Sec. 3.1), made a certified bound.
//
// One step of DP-SGD with Poisson sampling rate q and noise multiplier z is analysed
// as an (epsilon, delta)-DP mechanism, and the T steps are composed with a theorem
// for (epsilon, delta) guarantees:
//  1. the Gaussian mechanism N(0, z^2) on a sensitivity-1 query is (e0, d0)-DP for
//     every e0 >= 0 with d0 = Phi(1/(2z) - e0 z) - e^e0 Phi(-1/(2z) - e0 z), exactly
//     (Balle & Wang 2018, Thm. 8; = GdpDelta(1/z, e0), Bu et al. 2020, eq. 3.2);
//  2. on a Poisson sample of rate q it is (log(1 + q(e^e0 - 1)), q d0)-DP for adding or
//     removing one record (amplification by subsampling: Li, Qardaji, Su 2012, Thm. 1;
//     Balle, Barthe, Gaboardi 2018, Thm. 8);
//  3. T such steps compose by
//       kAdvanced: Dwork, Rothblum, Vadhan 2010, Thm. III.3 (Dwork & Roth 2014,
//                  Thm. 3.20), the "strong composition theorem" Abadi et al. compare
//                  with, with total delta = T q d0 + delta_slack; or
//       kOptimal:  Kairouz, Oh, Viswanath 2015, Thm. 3.3, the exact region of the T-fold
//                  composition of an (e_s, d_s)-DP mechanism.
// Every split of the total delta between d0 and the slack gives a valid bound; the
// accountant searches the split (the share of delta spent on the steps, on a log grid
// refined by golden-section search) and returns the smallest epsilon found, so the value
// is a certified upper bound whatever the search finds. It is much larger than the RDP
// or PLD bounds of the same run (the point of Abadi et al.'s comparison): use those
// accountants to account a run; this one exists to reproduce the comparison.
#ifndef DPKIT_ACCOUNTING_STRONG_COMPOSITION_H_
#define DPKIT_ACCOUNTING_STRONG_COMPOSITION_H_

#include <cstdint>

#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

enum class StrongCompositionTheorem {
  kAdvanced,  // Dwork, Rothblum, Vadhan 2010, Thm. III.3
  kOptimal,   // Kairouz, Oh, Viswanath 2015, Thm. 3.3
};

// Name for output: "advanced" / "optimal".
const char* StrongCompositionTheoremName(StrongCompositionTheorem theorem);

struct StrongCompositionBound {
  double epsilon;           // certified: the T steps are (epsilon, delta)-DP
  double gaussian_epsilon;  // e0 of one unsampled Gaussian step
  double gaussian_delta;    // d0 = GdpDelta(1/z, e0)
  double step_epsilon;      // log(1 + q (e^e0 - 1))
  double step_delta;        // q d0
  double slack_delta;       // delta - T q d0 (the delta' of the composition theorem)
};

// The bound above for T = steps steps of DP-SGD at total delta. sampling_rate in (0, 1],
// noise_multiplier finite > 0, steps in [1, 10^7], delta in (0, 1).
Result<StrongCompositionBound> StrongCompositionDpSgd(double sampling_rate,
                                                      double noise_multiplier, int64_t steps,
                                                      double delta,
                                                      StrongCompositionTheorem theorem);

// The same bound at one given split: a fraction `step_share` in (0, 1) of delta is spent
// on the steps (T q d0 = step_share * delta), the rest is the slack. Exposed for tests
// and plots of the search.
Result<StrongCompositionBound> StrongCompositionAtShare(double sampling_rate,
                                                        double noise_multiplier,
                                                        int64_t steps, double delta,
                                                        StrongCompositionTheorem theorem,
                                                        double step_share);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_STRONG_COMPOSITION_H_
