// Component PMFs: the pessimistic (dominating) and optimistic (dominated) PMFs of one
// component in one direction on the loss grid: from the loss tails (Gaussian, Laplace,
// discrete Gaussian, or a law given by its own tails), from enumerated atoms, and for
// randomized response.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_COMPONENT_PMFS_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_COMPONENT_PMFS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_discrete_gaussian.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting::pld_internal {

// The optional parts of BuildContinuousPmfs.
struct ContinuousPmfOptions {
  // The discrete Gaussian's tail table (that base only).
  const DiscreteGaussianTails* dg = nullptr;
  // Tails of a law given by its own function instead of m's (BuildDenseAtomsLowerPmf).
  const std::function<LossTails(ld)>* custom = nullptr;
  // If given, receives the tangent-corrected optimistic PMF (3a) alone.
  Pmf* lower_alt = nullptr;
  // The grid range of the cells (lo h, hi h] instead of the automatic one; the law's mass
  // outside it is then left out of both PMFs (a sub-measure, see (7) in
  // pld_decomposed.cc).
  std::optional<int64_t> lo_fixed, hi_fixed;
  // How often the component is used (sets the quadrature trigger, QuadratureTrigger).
  double steps = 1;
};

// Builds the pessimistic and optimistic PMFs of a Gaussian/Laplace/discrete Gaussian
// (sub)sampled component in one direction on the grid of spacing h. `tail` bounds the
// P-mass left outside the grid range. The lattice base's atoms are handled like any other
// law: a cell's P- and Q-masses are differences of tails, and the tails' stated error
// bounds enter the cell errors. A grid-limit error where the range needs more than
// kMaxGridPoints points.
Result<void> BuildContinuousPmfs(const Mechanism& m, Direction dir, double h, ld tail,
                                 Pmf* upper, Pmf* lower,
                                 const ContinuousPmfOptions& options = {});

// The optimistic PMF of (3) for a law of atoms (loss, P-mass), sorted by loss, each
// already below its exact position. Each atom gets a designated position pos and a Q-mass
// q >= p e^{-pos} (rounding allowance rho): its exact loss log(p/q) then lies in
// [pos - 2 rho, pos], below the given one (moving P-mass down is dominated). If a grid
// value lies in [pos - 2 rho, pos), pos moves down onto it, so that comparing pos with a
// grid value classifies the exact loss exactly. The tails are compensated (Neumaier)
// prefix and suffix sums: relative error a few ulps, inside the kCdfUlps that
// BuildContinuousPmfs allows.
Result<void> BuildDenseAtomsLowerPmf(const std::vector<std::pair<ld, ld>>& atoms,
                                     const Mechanism& m, Direction dir, double h, ld tail,
                                     Pmf* lower);

// The optimistic PMF of a law of atoms (loss, P-mass), each loss already lowered by its
// rounding bound and each mass rounded down, plus `infinity` P-mass at +inf. The bulk,
// where consecutive atoms are closer than h/2, gets the tangent-corrected optimistic PMF of
// (3) built from its exact tails (BuildDenseAtomsLowerPmf, second order in h); the
// isolated rest is rounded down to the grid (the tangent correction would drop isolated
// atoms: it subtracts ~ p h/4 beside each and then cuts the curve where that exceeds
// delta; rounding down loses at most the factor e^{-h} per atom, and is the best
// dominated placement of a single atom). Both parts are dominated, so is their sum (the
// delta-curve is linear in the law); atoms beyond |loss| = kMaxLoss are dropped.
Result<void> PlaceLowerAtoms(std::vector<std::pair<ld, ld>> atoms, const Mechanism& m,
                             Direction dir, double h, ld tail, ld infinity, Pmf* lower);

// Optimistic PMF of a discrete Gaussian component whose loss atoms are sparse on the grid
// (lattice spacing D/s^2 >= h): the atoms are enumerated, each P-mass rounded down and each
// loss lowered by its rounding bound eta (so below the exact loss), and placed by
// PlaceLowerAtoms (the tangent method where Poisson sampling makes them dense, rounded down
// where isolated). The tangent correction of BuildContinuousPmfs on the lattice's tails would
// drop isolated atoms (see PlaceLowerAtoms). Atoms with P-mass below `tail` (they carry no
// more than the grid's tail budget) are dropped.
Result<void> BuildLatticeLowerPmf(const Mechanism& m, const DiscreteGaussianTails& dg,
                                  Direction dir, double h, ld tail, Pmf* lower);

// Randomized response, the worst case of every (eps, delta)-DP mechanism (Kairouz, Oh,
// Viswanath 2015, Thm. 2.1): delta at +inf, (1-delta) e^eps/(1+e^eps) at eps and
// (1-delta)/(1+e^eps) at -eps. Points between grid values are split by connect-the-dots
// (pessimistic) or rounded down (optimistic).
void BuildRandomizedResponsePmfs(const Mechanism& m, double h, Pmf* upper, Pmf* lower);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_COMPONENT_PMFS_H_
