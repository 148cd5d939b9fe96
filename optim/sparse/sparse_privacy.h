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
//  * RdpEpsilon: the same mechanism by Rényi DP. Per step, the RDP of the inner
//    mechanism at order a is the sum of the Gaussian's a / (2 z^2) (Mironov 2017,
//    Prop. 7) and of the selection's: a pick of an epsilon0-DP mechanism costs
//    min(epsilon0, a epsilon0^2 / 2) (Bun & Steinke 2016, Prop. 3.3) and an
//    epsilon0-bounded-range one (the exponential mechanism) min(epsilon0,
//    a epsilon0^2 / 8) (Cesar & Rogers 2021, "Bounding, concentrating,
//    and truncating": epsilon-BR implies epsilon^2/8-zCDP). Poisson sampling by the
//    general upper bound of Zhu & Wang 2019 ("Poisson subsampled Rényi differential
//    privacy", Thm. 6) at integer orders 2..256, T steps add, and the conversion of
//    Balle et al. 2020 ("Hypothesis testing interpretations and Rényi DP", Thm. 21).
// Both are certified upper bounds. The step events written to the ledger
// (SparseDpSgd::StepEvent) carry the same information for the accountants of
// accounting/ (which, once they handle Composed inside PoissonSampled, give a third,
// PLD, bound; they do not know that the exponential mechanism is bounded-range).
#ifndef DPKIT_OPTIM_SPARSE_SPARSE_PRIVACY_H_
#define DPKIT_OPTIM_SPARSE_SPARSE_PRIVACY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

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

// The Zhu & Wang 2019 Thm. 6 bound on the RDP at integer order `order` >= 2 of the
// Poisson subsampled mechanism whose RDP at order l is inner_rdp[l] (l = 2..order;
// entries 0 and 1 are ignored).
double PoissonSubsampledRdpUpperBound(double sampling_rate, const std::vector<double>& inner_rdp,
                                      int order);

absl::StatusOr<double> StrongCompositionEpsilon(const SparseDpSgdPrivacyParams& params,
                                                double delta);
absl::StatusOr<double> RdpEpsilon(const SparseDpSgdPrivacyParams& params, double delta);

}  // namespace dpkit::optim::sparse

#endif  // DPKIT_OPTIM_SPARSE_SPARSE_PRIVACY_H_
