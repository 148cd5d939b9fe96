// The components of an event, prepared for both directions: the event flattened, the
// grid chosen (pld_mechanism), and the component PMFs of each direction built on demand
// (pld_component_pmfs, pld_sampled_composition).
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_DIRECTIONS_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_DIRECTIONS_H_

#include <utility>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_mechanism.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting::pld_internal {

struct Prepared {
  double h;
  ld tail;  // P-mass each component may leave outside its grid range
  std::vector<std::pair<Mechanism, double>> flat;
  std::vector<ComponentPmfs> remove, add;  // filled by BuildDirection
  bool symmetric;                          // the add direction equals the remove one
};

// Flattens the event and chooses the grid; the component PMFs are built on demand.
// `tail_budget` is split evenly over the uses of the components. An error for invalid
// options, unsupported events and more than 1e15 compositions.
Result<Prepared> Prepare(const Event& event, const GridOptions& options, ld tail_budget);

// Builds (once) the pessimistic and optimistic component PMFs of one direction, in the
// order of p->flat, and returns them.
Result<std::vector<ComponentPmfs>*> BuildDirection(Prepared* p, Direction dir);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_DIRECTIONS_H_
