// Poisson-sampled compositions: the PMFs of Poisson sampling applied to a whole
// composition (e.g. the sparse DP-SGD step PoissonSampled(q, Composed{BoundedRange,
// Gaussian})), from the PMFs of the composition's own components. The proof is in the .cc
// file.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_SAMPLED_COMPOSITION_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_SAMPLED_COMPOSITION_H_

#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting::pld_internal {

// The inner composition of a kSampledComposition component: its flattened components
// (mechanism, count) and their PMFs in the same direction and on the same grid
// (BuildDirection), in the same order.
struct InnerComposition {
  const std::vector<std::pair<Mechanism, double>>& flat;
  const std::vector<ComponentPmfs>& pmfs;
};

// The pessimistic and optimistic PMFs of the kSampledComposition component m (sampling
// rate m.sampling_rate) in direction dir on the grid of spacing h. `tail` as for
// BuildContinuousPmfs. An error where the inner composition uses an event more than 1e6
// times; a grid-limit error where its direct convolution would exceed kMaxConvolutionWork.
Result<void> BuildSampledCompositionPmfs(const Mechanism& m, Direction dir, double h, ld tail,
                                         const InnerComposition& inner, Pmf* upper,
                                         Pmf* lower);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_SAMPLED_COMPOSITION_H_
