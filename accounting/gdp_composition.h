// GDP composition over an event tree: the mu of a whole run, for the GDP accountant of
// the accounting report (accounting/report.h).
//
// Under mu-GDP, compositions add mu's in quadrature (Dong, Roth, Su 2019, Cor. 3.3):
// the mu of Composed / SelfComposed events is sqrt(sum of the children's mu^2). A
// Gaussian with noise multiplier z is exactly (1/z)-GDP (ibid., Thm. 2.7). A
// Poisson-subsampled Gaussian step contributes the CLT term p^2 (e^{1/z^2} - 1) of Bu,
// Dong, Long, Su 2020, eq. (3.1): only an APPROXIMATION (not an upper bound), which the
// result records; at p = 1 the step is the Gaussian itself and exact. Other events
// (Laplace, pure DP, ...) have no mu: GdpMuOfEvent returns an error naming them.
#ifndef DPKIT_ACCOUNTING_GDP_COMPOSITION_H_
#define DPKIT_ACCOUNTING_GDP_COMPOSITION_H_

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

struct GdpComposition {
  double mu;         // finite >= 0
  bool approximate;  // true when a CLT term (Bu et al. 2020, eq. 3.1) entered mu
};

// The mu of `event` (see the file comment). Errors: an event kind GDP does not account,
// or a mu that overflows a double (the noise is far too small).
Result<GdpComposition> GdpMuOfEvent(const Event& event);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_GDP_COMPOSITION_H_
