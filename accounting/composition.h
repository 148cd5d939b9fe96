// Composition theorems for (epsilon, delta)-DP mechanisms.
//
// These bound the privacy of running k mechanisms on the same data when all that is
// known about each is an (epsilon, delta) guarantee. (When the mechanisms are known
// — Gaussian, subsampled Gaussian — the RDP and PLD accountants are much tighter.)
//   basic     (Dwork, McSherry, Nissim, Smith 2006; Dwork & Roth 2014, Thm. 3.16):
//             epsilons and deltas add.
//   advanced  (Dwork, Rothblum, Vadhan 2010, Thm. III.3; Dwork & Roth 2014, Thm. 3.20).
//   optimal   (Kairouz, Oh, Viswanath 2015, Thm. 3.3): the exact privacy region of the
//             k-fold homogeneous composition.
// All results are certified upper bounds (no approximation).
#ifndef DPKIT_ACCOUNTING_COMPOSITION_H_
#define DPKIT_ACCOUNTING_COMPOSITION_H_

#include <cstdint>
#include <vector>

#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// An (epsilon, delta)-DP guarantee.
struct ApproxDpGuarantee {
  double epsilon;
  double delta;
};

// Basic composition of `count` copies of an (epsilon, delta)-DP mechanism:
// (count * epsilon, min(1, count * delta)). epsilon finite >= 0, delta in [0, 1],
// count >= 1.
Result<ApproxDpGuarantee> BasicComposition(double epsilon, double delta, int64_t count);

// Basic composition of heterogeneous guarantees: the sums (delta capped at 1).
Result<ApproxDpGuarantee> BasicComposition(
    const std::vector<ApproxDpGuarantee>& guarantees);

// Advanced composition (Dwork, Rothblum, Vadhan 2010): for any delta_slack in (0, 1),
// the k-fold composition is (eps', k delta + delta_slack)-DP with
// eps' = eps sqrt(2 k ln(1/delta_slack)) + k eps (e^eps - 1).
// The returned epsilon is min(eps', k eps): basic composition always holds as well.
Result<ApproxDpGuarantee> AdvancedComposition(double epsilon, double delta,
                                              int64_t count, double delta_slack);

// Optimal homogeneous composition (Kairouz, Oh, Viswanath 2015, Thm. 3.3): the
// smallest total delta such that `count` copies of an (epsilon, delta)-DP mechanism
// are (total_epsilon, total_delta)-DP:
//   1 - (1 - delta)^k (1 - sum_l C(k,l) (e^{(k-l)eps} - e^{total_eps + l eps})_+
//                          / (1 + e^eps)^k).
// At total_epsilon = (k - 2i) eps this is exactly KOV's delta_i; in between it is the
// hockey-stick divergence of the same dominating pair (k-fold randomised response
// mixed with delta), hence still exact. Computed in log space (long double).
// count in [1, 10^7].
Result<double> OptimalCompositionDelta(double epsilon, double delta, int64_t count,
                                       double total_epsilon);

// The smallest total epsilon with OptimalCompositionDelta(...) <= total_delta
// (found by TOMS 748; the returned value is on the safe side). Errors when even
// total_epsilon = k eps cannot reach total_delta, i.e. total_delta < 1 - (1-delta)^k.
Result<double> OptimalCompositionEpsilon(double epsilon, double delta, int64_t count,
                                         double total_delta);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_COMPOSITION_H_
