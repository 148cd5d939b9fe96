// The decomposed bound, (7): bounds on delta(eps) or eps(delta) for one Gaussian or
// Laplace component used many times whose per-step bulk is narrower than the grid can
// resolve (small q and sigma), from its bulk and its tail composed separately. The proof
// is in the .cc file.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_DECOMPOSED_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_DECOMPOSED_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_mechanism.h"
#include "dpkit/accounting/result.h"
#include "dpkit/accounting/internal/real_fft.h"

namespace dpkit::accounting::pld_internal {

// Direct convolution of two non-negative PMFs: a on a grid of spacing H, b on a grid of
// spacing r H (its index i is the loss i r H); the result is on the H grid. Each entry is
// a sum of at most b.size() non-negative products, rounded down (lower) or up (upper) by
// an allowance covering that many roundings. Lower: mass at +inf and masses below 1e-150
// are dropped. Upper: they go to +inf, with every product they could take part in.
Result<Pmf> ConvolveDirect(const Pmf& a, const Pmf& b, int64_t r, Bound bound);

// The law `pmf` on the grid h moved onto the grid f h (f a power of two, so that f h is
// exact in double, as the coarse grid's spacing must be): each atom's loss rounded up
// (upper) or down (lower) to a multiple of f h, masses kept. A larger loss only raises
// delta(eps) = sum p (1 - e^{eps - l})_+, and composition adds losses, so rounding up keeps
// a dominating law and rounding down a dominated one ((3), for sub-measures too). Each
// coarse atom sums at most f non-negative masses (f + 4 roundings, covered by an
// allowance: up for the upper bound, down for the lower); +inf stays at +inf.
Pmf CoarsenByFactor(const Pmf& pmf, int64_t f, Bound bound);

// Cost limits of the decomposition (7), so that it costs a fraction of a second, never
// minutes (issue 21: q = 0.01, sigma = 0.3, T = 1000 spent 92 % of 9 s in it; q = 1e-6,
// sigma = 0.5, T = 1000, delta = 1e-15 built a 1.2M-cell tail grid for no lower bound at all).
// The bulk's fine grid h_f is coarsened until its cells up to tau fit kMaxDecomposedFineCells
// (any grid gives certified bounds: only tightness depends on it), and the decomposition is
// skipped where the tail grid would need more than kMaxDecomposedTailCells cells (its powers
// and products are summed directly, at a cost quadratic in that count), or the bulk's grid,
// down to where the tail budget lets it start, as many.
constexpr int64_t kMaxDecomposedFineCells = int64_t{1} << 15;
constexpr int64_t kMaxDecomposedTailCells = int64_t{1} << 16;

// One component used `total` times, as the decomposition sees it: in direction dir, with
// its pessimistic PMF on the ordinary grid h_pess (for the tilt and the grids), the
// requested tolerance and the tail budget of its grids.
struct DecompositionInput {
  Mechanism m;
  Direction dir;
  int64_t total;
  const Pmf& pessimistic;
  double h_pess;
  double tolerance;
  ld tail;
};

// The decomposed bound (7) for the query: nullopt where the decomposition does not apply
// (not a Gaussian or Laplace base, fewer than 16 uses, or a bulk it cannot resolve); an
// error where a step failed. `hint`: the ordinary upper bound of the same direction.
// `delta0_lower` (lower bound only, if not null) is raised to a certified lower bound on
// delta(0): the block laws composed once more, with the tilt for loss 0.
Result<std::optional<ld>> DecomposedBound(const DecompositionInput& in, Bound bound,
                                          const Query& query, ld hint,
                                          RealFft* fft,
                                          ld* delta0_lower = nullptr);

// The decomposed bounds of an event: each nullopt where not asked for or where (7) does
// not apply, an error where it failed.
struct DecomposedResults {
  Result<std::optional<ld>> lower = std::optional<ld>();
  Result<std::optional<ld>> upper = std::optional<ld>();
  ld delta0_lower = 0;  // with_delta0: a certified lower bound on delta(0) (DecomposedBound)
};

// The decomposed bounds (7) of an event made of one Gaussian or Laplace component used 16
// to 1e12 times, in direction `dir`, on the grid of `options` (the tilt and the block grid
// follow from it): the bounds asked for. nullopt where the event does not have that form.
// with_delta0: also DecomposedResults::delta0_lower (with the lower bound).
Result<std::optional<DecomposedResults>> DecomposedBoundsForEvent(
    const Event& event, const GridOptions& options, ld tail_budget, Direction dir,
    const std::vector<Bound>& bounds, const Query& query, ld hint, bool with_delta0 = false);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_DECOMPOSED_H_
