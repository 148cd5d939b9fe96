// For tests: delta(eps) of a law on a grid, summed directly atom by atom,
//   delta(eps) = sum_i p_i (1 - e^{eps - l_i})_+ + (mass at +inf),  l_i = i h,
// the hockey-stick divergence written in the privacy loss (Dong, Roth, Su 2019; Koskela
// et al. 2020, eq. (2)): an evaluation independent of the FFT composition and of the
// delta-curve code that the tests check.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_DIRECT_DELTA_TESTING_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_DIRECT_DELTA_TESTING_H_

#include <cmath>
#include <cstdint>

#include "dpkit/accounting/internal/pld_common.h"

namespace dpkit::accounting::pld_internal {

inline ld DirectDeltaForTesting(const Pmf& pmf, double h, ld epsilon) {
  ld delta = pmf.infinity_mass;
  for (size_t i = 0; i < pmf.mass.size(); ++i) {
    const ld l = static_cast<ld>(pmf.min_index + static_cast<int64_t>(i)) * h;
    if (l > epsilon) delta += pmf.mass[i] * (1 - std::exp(epsilon - l));
  }
  return delta;
}

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_DIRECT_DELTA_TESTING_H_
