// Staged composition, (6): one component used T times composed in two stages (T1 ~ sqrt(T)
// steps on the fine grid, re-discretised onto a coarser grid, then powered). The proof is
// in the .cc file.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_STAGED_COMPOSITION_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_STAGED_COMPOSITION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_fft_composition.h"
#include "dpkit/accounting/result.h"
#include "dpkit/accounting/internal/real_fft.h"

namespace dpkit::accounting::pld_internal {

// Floor of a / b for b > 0.
int64_t FloorDiv(int64_t a, int64_t b);

// Re-discretises a composed window (fine grid c.h) onto the grid of spacing k c.h: the
// pessimistic measure (bound kUpper) by connect-the-dots, the optimistic one by the
// tangent method, both through CellsToPmfs (see (6) for why each stays certified).
Pmf Rediscretize(const Composed& c, Bound bound, int64_t k);

// When one component is composed in two stages: from kStagedSteps steps on (there the
// single fine window costs more than the two small ones), and from kMinStagedSteps steps
// where the optimistic PMF's P-mass deficit eta (the mass its tangent correction removes)
// compounds to T eta > kStagedDeficitPerTolerance * tolerance (StagingRule::kWithDeficit:
// not for the coarse check of the add direction, which has no lower bound): the two
// stages keep the windows small enough for the refinement of CertifiedBounds to reach
// grids on which eta is small (e.g. sigma = 0.5, q = 0.01, T = 1e5: lower bound 213.6 ->
// 221.77, upper 221.91). Below them one FFT is cheap and the fine grid's accuracy is kept.
constexpr double kStagedSteps = 262144;
constexpr double kMinStagedSteps = 4096;
// T eta is the relative shortfall of the optimistic delta; epsilon falls short by about
// T eta / (lambda eps), and lambda eps (the saddle point times eps) is ~10 or more in
// practice, so T eta <= 100 tolerance keeps the shortfall near the target gap of
// CertifiedBounds (10 tolerance).
constexpr ld kStagedDeficitPerTolerance = 100;

// Whether the deficit rule may choose two stages below kStagedSteps.
enum class StagingRule { kWithDeficit, kStepsOnly };

// A two-stage composition: T1 steps on the fine grid, then the grid factor k.
struct StagePlan {
  int64_t t1, k;
};

// Plans a two-stage composition; nullopt where one stage is used (several components, or
// too few steps).
std::optional<StagePlan> PlanStages(const std::vector<ComponentPmfs>& comps, StagingRule rule,
                                    double tolerance);

// Two-stage composition, (6): returns the composed window on the coarse grid (or on the
// fine one, composed in one stage, where the coarse grid would cost accuracy). `points`
// is raised to the largest first-stage window.
Result<Composed> ComposeStaged(const std::vector<ComponentPmfs>& comps, Bound bound, double h,
                               const Query& query, double tolerance, StagePlan plan,
                               RealFft* fft, int64_t* points);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_STAGED_COMPOSITION_H_
