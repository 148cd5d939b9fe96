// Cell discretisation: a measure known by its cell moments on a loss grid becomes a
// pessimistic PMF (connect-the-dots, (2)) and optimistic PMFs (tangent-corrected (3a),
// mass-preserving chain (3b), and their join (3c)). Used for the components
// (BuildContinuousPmfs) and for re-discretising a composition onto a coarser grid
// (Rediscretize). The proofs are in the .cc file.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_CELLS_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_CELLS_H_

#include <cstdint>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"

namespace dpkit::accounting::pld_internal {

// The moments of the n cells (x_i, x_{i+1}] of a measure on the grid points lo, ...,
// lo + n (x_i = e^{(lo + i) h}): for cell i with P-mass A_i and Q-mass B_i,
// c_i = A_i - x_i B_i and d_i = x_{i+1} B_i - A_i, known within [c_lo, c_up] and
// [d_lo, d_up] (all four vectors of length n).
struct CellBounds {
  std::vector<ld> c_up, d_up, c_lo, d_lo;
};

// Removes non-convex kinks of an optimistic delta-curve (negative masses on the grid of
// spacing h): each is merged into its nearest kept neighbours so that the curve becomes
// the chord over the kink, which lies below (see (3a)).
void RemoveNegativeKinks(ld h, std::vector<ld>* mass);

// The tangent-corrected optimistic PMF of (3a) on the grid points lo, ..., lo + n.
void TangentLowerPmf(int64_t lo, double h, const CellBounds& cells, Pmf* lower);

// The mass-preserving chain optimistic PMF of (3b) on the grid points lo, ..., lo + n.
void ChainLowerPmf(int64_t lo, double h, const CellBounds& cells, Pmf* lower);

// Combines two optimistic PMFs on the same grid (the chain g1, left, and the tangent
// g2, right; see (3c)): at a grid point k with g1(x_k) >= g2(x_k) and
// p* = sum_{j>=k} p1_j - sum_{j>k} p2_j >= 0, the PMF {p1_j, j < k; p* at k; p2_j, j > k}
// has delta-curve g2 on [x_k, inf) and below g1 on [0, x_k]. k is taken just below the
// highest grid point where g2 is certifiably above g1 (the tail), so the chain's exact
// bottom and the tangent PMF's tail are both kept; without such a point the chain is used.
void CombineLowerPmfs(double h, Pmf g1, const Pmf& g2, Pmf* out);

// The pessimistic (connect-the-dots, (2)) and optimistic (combined, (3c)) PMFs on
// the grid points lo, ..., lo + n (spacing h) of a measure given by its cell moments: for
// cell i = (eps_{lo+i}, eps_{lo+i+1}] with P-mass A_i and Q-mass B_i,
// c_i = A_i - x_i B_i and d_i = x_{i+1} B_i - A_i (x_i = e^{eps_{lo+i}}), known within
// [c_lo, c_up] and [d_lo, d_up]. below_mass (P-mass at or below eps_lo) is moved up to
// eps_lo and above_mass (P-mass above the top) goes to +inf in the pessimistic PMF; the
// optimistic PMF leaves both out. Used for the components (BuildContinuousPmfs) and for
// re-discretising a composition onto a coarser grid (Rediscretize). lower_alt, if given,
// receives the tangent-corrected optimistic PMF (3a) alone.
void CellsToPmfs(int64_t lo, double h, const CellBounds& cells, ld below_mass, ld above_mass,
                 Pmf* upper, Pmf* lower, Pmf* lower_alt = nullptr);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_CELLS_H_
