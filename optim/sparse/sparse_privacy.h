// (epsilon, delta) of sparse DP-SGD (sparse_dp_sgd.h) after `steps` steps, two ways:
//
//  * StrongCompositionEpsilon: the analysis of Zhang, Mironov & Hejazinia 2021
//    (their Theorem 3 composes the per-step guarantees with the strong composition
//    theorem). Per step: selection epsilon_sel (pure) + Gaussian (epsilon_g, delta_g)
//    from the analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8) by basic
//    composition; amplified by Poisson sampling to
//    (log(1 + q (e^eps - 1)), q delta_g) (Balle, Barthe & Gaboardi 2018, "Privacy amplification by subsampling",
//    Poisson sampling under add/remove);
//    then T steps by advanced composition (Dwork, Rothblum & Vadhan 2010; Dwork &
//    Roth 2014, Thm. 3.20), or basic composition when smaller. delta is split half for
//    the T per-step deltas and half for the composition slack.
//  * SparseDpSgdEvent: the same mechanism as an accounting event, for any accountant
//    (accounting::CertifiedRdpEpsilon of accounting/report.h gives its Rényi-DP epsilon;
//    optim/ uses accounting's events only). The event has the shape SparseDpSgd::StepEvent
//    records: T steps of
//    PoissonSampled(q, Composed{SelfComposed(pick, picks), Gaussian(z)})). A pick is
//    BoundedRange(epsilon0) for the exponential mechanism (its exact bounded-range RDP,
//    at most min(epsilon0, a epsilon0^2 / 8), Cesar & Rogers 2021) or PureDp(epsilon0)
//    (randomized-response RDP); Poisson sampling by the general upper bound of Zhu &
//    Wang 2019 ("Poisson subsampled Rényi differential privacy", Thm. 6); the default
//    RDP orders; the conversion of Balle et al. 2020 ("Hypothesis testing
//    interpretations and Rényi DP", Thm. 21).
// Both are certified upper bounds. `dpkit ledger` gives the same RDP number for the
// ledger of a run (and a PLD bound only where the PLD accountant applies, which
// excludes Poisson sampling of a composition).
#ifndef DPKIT_OPTIM_SPARSE_SPARSE_PRIVACY_H_
#define DPKIT_OPTIM_SPARSE_SPARSE_PRIVACY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"

namespace dpkit::optim::sparse {

struct SparseDpSgdPrivacyParams {
  double sampling_rate = 0.01;      // q in (0, 1]
  double noise_multiplier = 1.0;    // z > 0 of the Gaussian on the selected rows
  double selection_epsilon_per_pick = 0.1;  // >= 0 (0: no selection cost)
  int64_t selection_picks = 1;      // >= 1 picks per step
  bool selection_bounded_range = false;  // true for the exponential mechanism
  int64_t steps = 1;                // T >= 1
};

// Smallest epsilon >= 0 with the Gaussian mechanism of noise multiplier z being
// (epsilon, delta)-DP: delta(eps) = Phi(1/(2z) - eps z) - e^eps Phi(-1/(2z) - eps z)
// (Balle & Wang 2018, Thm. 8), solved by bisection to relative 1e-12 and rounded up.
absl::StatusOr<double> AnalyticGaussianEpsilon(double noise_multiplier, double delta);

// The accounting event of `steps` steps (see above); InvalidArgument for bad params.
absl::StatusOr<accounting::Event> SparseDpSgdEvent(const SparseDpSgdPrivacyParams& params);

absl::StatusOr<double> StrongCompositionEpsilon(const SparseDpSgdPrivacyParams& params,
                                                double delta);

}  // namespace dpkit::optim::sparse

#endif  // DPKIT_OPTIM_SPARSE_SPARSE_PRIVACY_H_
