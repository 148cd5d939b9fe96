// Sampling without replacement under REPLACE-ONE adjacency: the PMFs of the component
// SampledWithoutReplacement(n, m, base) (Base::kWithoutReplacement) from the PMFs of the
// Poisson-sampled base's remove direction, and the event whose PLD lower bound is a
// certified lower bound on the mechanism's exact value. The proof is in the .cc file.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_REPLACE_ONE_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_REPLACE_ONE_H_

#include <cstdint>
#include <optional>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting::pld_internal {

// The sampling rate m / n of a without-replacement event rounded up (for the upper bound,
// which grows with the rate) or down (for the lower bound): int64 -> double conversions and
// the division are each within an ulp, so a factor 1 +- 8 DBL_EPSILON covers them.
double WithoutReplacementRate(int64_t population, int64_t sample_size, Bound bound);

// The symmetric PMFs of the single-step tradeoff function C_p(f) of DRS 2019 (Thm. 4.2)
// from the remove-direction PMFs of PoissonSampled(p, base) on the same grid (spacing h):
// `poisson` holds them (upper dominating, lower and lower_alt dominated); `out` receives
// the symmetrized upper (curve >= that of C_p(f) at every eps), lower and lower_alt
// (curves <= it at every eps); out->count is left as it is.
void SymmetrizeRemovePmfs(const ComponentPmfs& poisson, double h, ComponentPmfs* out);

// One half of SymmetrizeRemovePmfs: the symmetrized dominating (bound == kUpper) or
// dominated (kLower) PMF of one remove-direction PMF.
Pmf SymmetrizeRemovePmf(const Pmf& remove, double h, Bound bound);

// The event of the explicit neighbouring datasets behind the lower bound: every
// SampledWithoutReplacement(n, m, inner) with m < n replaced by PoissonSampled(m/n
// rounded down, inner) (and by `inner` where m = n). nullopt where the event has no
// without-replacement node with m < n (its own lower bound is then the mechanism's).
Result<std::optional<Event>> RealizedPairEvent(const Event& event);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_REPLACE_ONE_H_
