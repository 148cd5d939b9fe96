// Mechanism components and grid choice: an event tree flattened into its components (base
// mechanism, sampling rate, use count), and the loss grid spacing chosen for them.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_MECHANISM_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_MECHANISM_H_

#include <map>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting::pld_internal {

// The grid request of PldOptions (accounting/pld.h): the relative accuracy wanted, and a
// fixed spacing (0: chosen from the accuracy).
struct GridOptions {
  double epsilon_tolerance;
  double discretization_interval;
};

// An error naming the option where epsilon_tolerance is outside [1e-7, 0.1] or
// discretization_interval is neither 0 nor in [1e-7, 1].
Result<void> CheckGridOptions(const GridOptions& options);

// Flattens an event tree into (mechanism, count) with counts multiplied out, sampling
// rates of nested Poisson sampling multiplied, a Poisson-sampled composition kept as
// one kSampledComposition component and a without-replacement sampled base as one
// kWithoutReplacement component (added to *out). An error for events the PLD
// accountant does not support.
Result<void> Flatten(const Event& event, double count, double sampling_rate,
                     std::map<Mechanism, double>* out);

// A rough per-step loss variance of the component (grid choice only).
double RoughLossVariance(const Mechanism& m);

// Grid spacing from the tolerance (or the fixed spacing of the options).
double ChooseInterval(const std::map<Mechanism, double>& flat, const GridOptions& options);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_MECHANISM_H_
