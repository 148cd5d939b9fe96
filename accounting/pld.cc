// The PLD accountant's driver: both directions, the certified retries and refinements, and
// the public functions of pld.h. The proof steps live in accounting/internal/ (see
// accounting/README.md for the layout), each beside the proof it rests on:
//   (1) dominance under composition           pld_common.h
//   (2) pessimistic discretisation, (3) optimistic discretisations
//                                             pld_cells.cc
//   (2b) quadrature cell moments              pld_cell_moments.cc
//   loss tails, discrete-Gaussian tails       pld_loss_tails.cc, pld_discrete_gaussian.h
//   component PMFs, sampled compositions      pld_component_pmfs.cc, pld_sampled_composition.cc
//   (4) tilted-FFT composition                pld_fft_composition.cc
//   (6) two-stage composition                 pld_staged_composition.cc
//   (7) decomposed bound                      pld_decomposed.cc
//   delta-curve and epsilon search            pld_delta_curve.cc
//
// (5) Directions and grids (CertifiedBounds). eps = max over the two directions, so the
//     certified upper bound is the maximum of the two certified upper bounds, and any
//     certified lower bound of either direction is a certified lower bound of eps; the
//     lower bound of the direction with the larger upper bound is within one gap of the
//     exact value. A direction whose certified upper bound on a coarser grid is already
//     <= the other's certified upper bound cannot change the maximum and is skipped. Any
//     two certified results (different grids) may be combined as [max lower, min upper].
#include "dpkit/accounting/pld.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_decomposed.h"
#include "dpkit/accounting/internal/pld_delta_curve.h"
#include "dpkit/accounting/internal/pld_directions.h"
#include "dpkit/accounting/internal/pld_fft_composition.h"
#include "dpkit/accounting/internal/pld_mechanism.h"
#include "dpkit/accounting/internal/pld_replace_one.h"
#include "dpkit/accounting/internal/pld_staged_composition.h"
#include "dpkit/accounting/internal/real_fft.h"

namespace dpkit::accounting {
namespace {

using internal::FormatDouble;
using pld_internal::Bound;
using pld_internal::ComponentPmfs;
using pld_internal::Composed;
using pld_internal::DeltaCurve;
using pld_internal::Direction;
using pld_internal::GridOptions;
using pld_internal::kMaxGridPoints;
using pld_internal::operator""_ld;
using pld_internal::kUnit;
using pld_internal::ld;
using pld_internal::Pmf;
using pld_internal::Query;
using pld_internal::StagingRule;

GridOptions Grid(const PldOptions& options) {
  return GridOptions{options.epsilon_tolerance, options.discretization_interval};
}

// What one direction's bound is computed for: the query, the tolerance, `hint` (the upper
// bound of the same direction, for the lower eps search) and whether the deficit rule may
// choose two stages.
struct BoundRequest {
  Query query;
  double tolerance;
  ld hint = 0;
  StagingRule staging = StagingRule::kWithDeficit;
};

// A single use of a single component needs no composition: its PMF is the answer
// (untilted, exact up to the per-mass rounding that MakeCurve allows for). This avoids
// the FFT's error allowances, which dominate for one step with a tiny epsilon.
Composed SingleUse(const Pmf& pmf, double h) {
  Composed single;
  single.h = h;
  single.window_start = pmf.min_index;
  single.n = static_cast<int64_t>(pmf.mass.size());
  single.tilted.assign(pmf.mass.begin(), pmf.mass.end());
  single.lambda = 0;
  single.log_scale = 0;
  single.entry_error = 0;
  single.tilted_outside = 0;
  single.log_above_bound = -std::numeric_limits<ld>::infinity();
  single.infinity_mass = pmf.infinity_mass;
  return single;
}

// Certified bound on delta(0) (the total variation distance) of one direction from a curve
// already built for another query. Lower: DeltaAt(0) (the omitted mass only lowers it).
// Upper: the mass below the window is not on the curve, so only a window starting at a
// loss <= 0 certifies it (that mass then has loss < 0 and adds nothing to delta(0)); else
// the trivial 1.
ld DeltaAtZero(const DeltaCurve& curve, Bound bound) {
  if (bound == Bound::kUpper && static_cast<ld>(curve.start) * curve.h > 0) return 1;
  return DeltaAt(curve, 0);
}

// A few uses of one component on a small grid: the T-fold composition by direct
// summation (ConvolveDirect, pld_decomposed.h: each entry a sum of non-negative products
// with a relative rounding allowance, the pessimistic side sending the masses it drops to
// +inf), which composes dominating PMFs into a dominating PMF ((1), pld_common.h). The FFT
// composition's error allowances are absolute: at delta near 1e-15 they floor eps (issue
// 21: q = 1e-4, T = 10, delta = 1e-15 gave upper bounds near 7e-5 for every sigma from 30 to
// 100, sigma 50 above sigma 30). nullopt where it does not apply or would be too large.
constexpr double kDirectMaxSteps = 64;
constexpr int64_t kDirectMaxPoints = 20000;  // composed points: <= 2e8 products in all

std::optional<Pmf> ComposeDirectly(const std::vector<ComponentPmfs>& comps, Bound bound) {
  if (comps.size() != 1 || !(comps[0].count >= 2 && comps[0].count <= kDirectMaxSteps)) {
    return std::nullopt;
  }
  const Pmf& pmf = comps[0].of(bound);
  const int64_t steps = static_cast<int64_t>(comps[0].count);
  if (static_cast<double>(steps) != comps[0].count || pmf.mass.empty() ||
      static_cast<int64_t>(pmf.mass.size()) * steps > kDirectMaxPoints) {
    return std::nullopt;
  }
  Pmf composed = pmf;
  for (int64_t t = 1; t < steps; ++t) {
    auto next = pld_internal::ConvolveDirect(composed, pmf, 1, bound);
    if (!next.ok()) return std::nullopt;
    composed = std::move(*next);
  }
  return composed;
}

// eps(delta) or delta(eps) of one direction: the certified `bound`. `points` is raised to
// the largest grid used (component or window). `delta0` (if not null) is tightened (min for
// the upper bound, max for the lower) by the certified delta(0) of each curve built.
Result<ld> DirectionBound(const std::vector<ComponentPmfs>& comps, Bound bound, double h,
                          const BoundRequest& request, pld_internal::RealFft* fft,
                          int64_t* points, ld* delta0 = nullptr) {
  const auto fold_delta0 = [&](const DeltaCurve& curve) {
    if (delta0 == nullptr) return;
    const ld v = DeltaAtZero(curve, bound);
    *delta0 = bound == Bound::kUpper ? std::min(*delta0, v) : std::max(*delta0, v);
  };
  const Query& query = request.query;
  const double tolerance = request.tolerance;
  Result<Composed> composed = Error{""};
  bool deficit_staged = false;  // two stages chosen only by the deficit rule
  if (comps.size() == 1 && comps[0].count == 1) {
    composed = SingleUse(comps[0].of(bound), h);
  } else if (const auto plan = PlanStages(comps, request.staging, tolerance)) {
    composed = ComposeStaged(comps, bound, h, query, tolerance, *plan, fft, points);
    deficit_staged = comps[0].count < pld_internal::kStagedSteps;
  } else {
    composed = Compose(comps, bound, h, query, tolerance, fft);
  }
  if (!composed.ok()) return composed.error_value();
  // Both certified: the direct composition's answer is kept where it is tighter.
  std::optional<ld> direct_value;
  if (const auto direct = ComposeDirectly(comps, bound)) {
    const DeltaCurve direct_curve = MakeCurve(SingleUse(*direct, h), bound);
    direct_value = CurveAnswer(direct_curve, query, request.hint);
    fold_delta0(direct_curve);
  }
  *points = std::max(*points, composed->n);
  for (const ComponentPmfs& c : comps) {
    *points = std::max(*points, static_cast<int64_t>(c.of(bound).mass.size()));
  }
  ld value;
  {
    // The curve takes the window over and is freed before any further composition.
    const DeltaCurve curve = MakeCurve(std::move(*composed), bound);
    value = CurveAnswer(curve, query, request.hint);
    fold_delta0(curve);
  }
  // Below kStagedSteps the stages serve the tangent PMF's deficit; the single stage keeps
  // the fine grid's accuracy (e.g. q = 1e-4, sigma = 0.6, T = 1e4: upper 0.27487 in one
  // stage, 0.27628 in two) but can miss a heavy tail's window (then its bound is trivial).
  // Both are certified: the tighter one is kept.
  if (deficit_staged) {
    auto single = Compose(comps, bound, h, query, tolerance, fft);
    if (single.ok()) {
      *points = std::max(*points, single->n);
      const DeltaCurve single_curve = MakeCurve(std::move(*single), bound);
      const ld v1 = CurveAnswer(single_curve, query, request.hint);
      fold_delta0(single_curve);
      value = bound == Bound::kUpper ? std::min(value, v1) : std::max(value, v1);
    }
  }
  if (direct_value) {
    value = bound == Bound::kUpper ? std::min(value, *direct_value) : std::max(value, *direct_value);
  }
  return value;
}

// With PldOptions::with_delta0: the certified delta(0) of one direction's `bound` composed
// on the grid of its epsilon bound with the tilt chosen for delta(0) (the epsilon query's
// tilt amplifies the error allowances at losses near 0 by e^{K - lambda l}: e.g. lower
// 0.2123 against 0.22445 at the Table 1 row 2 setting), folded into *delta0 (min for the
// upper bound, max for the lower). One composition, no search, no refinement of its own:
// the grid is the one epsilon needed. A failed composition leaves *delta0 as it is (the
// trivial bound or one already folded in).
void Delta0Bound(const std::vector<ComponentPmfs>& comps, Bound bound, double h, double tol,
                 pld_internal::RealFft* fft, ld* delta0) {
  const Query zero{Query::Kind::kDeltaAtEpsilon, 0};
  int64_t points = 0;  // not counted: the refinement follows epsilon's grids only
  auto v = DirectionBound(comps, bound, h, {zero, tol}, fft, &points, delta0);
  if (!v.ok()) return;
  *delta0 = bound == Bound::kUpper ? std::min(*delta0, *v) : std::max(*delta0, *v);
}

// Whether [*lower, *upper] on delta(0) is still wider than the refinement target of
// PldDelta (gap <= 10 tolerance delta; report.cc asks for the same), or has no certified
// upper bound below the trivial 1.
bool Delta0GapWide(ld upper, ld lower, double tol) {
  return !(upper < 1) || upper - lower > 10 * static_cast<ld>(tol) * upper;
}

// A coarse grid (this factor times the grid spacing: error ~36x larger, work ~6x
// smaller) decides whether the add direction can matter; see CertifiedBounds.
constexpr double kCoarseFactor = 6;

struct RawBounds {
  ld upper, lower;
  double h;
  int64_t points = 0;  // largest grid used
  Direction dominant = Direction::kRemove;  // the direction of the lower bound
  ld other_upper = 0;  // a certified upper bound of the other direction (0: symmetric)
  // Certified bounds on delta(0) from the curves built, see DirectionBound. Any direction's
  // bound serves both: delta(0) is the total variation distance sup TV(M(D), M(D')) over
  // the neighbouring pairs, and the add direction's pairs are the remove direction's
  // swapped, which TV does not see (it is symmetric; Dong, Roth, Su 2019, Prop. 2.12 at
  // eps = 0). So the upper bound is the minimum over every certified curve, either
  // direction, every grid; the lower bound the maximum.
  ld delta0_upper = 1, delta0_lower = 0;
  bool coarsened = false;  // the automatic grid did not fit (CoarsenUntilFits)
  bool delta0_decomposed = false;  // Delta0Decomposed applied (7) to delta(0)
};

// Both bounds certified: keep the tighter side of each (5).
void KeepTighter(const RawBounds& other, RawBounds* b) {
  b->upper = std::min(b->upper, other.upper);
  b->lower = std::max(b->lower, other.lower);
  b->delta0_upper = std::min(b->delta0_upper, other.delta0_upper);
  b->delta0_lower = std::max(b->delta0_lower, other.delta0_lower);
}

// With PldOptions::with_delta0: delta(0) from the compositions of this grid, composing
// only what the curves built for epsilon leave open (issue 16: the command costs what the
// computation costs). Those curves' upper bound on delta(0) is usually within the target
// (Table 1 row 2: 0.224501 against 0.224477 with its own tilt), their lower bound not
// (0.2123 against 0.22445), so the lower bound is composed with its own tilt first, and the
// upper bound only where the gap is still wide (or the curves certified none). `dominant`
// serves the lower bound, the remove direction the upper (delta(0) is symmetric,
// RawBounds::delta0_upper). Where the gap stays wide (a bulk too narrow for the grid:
// Table 1 row 6), CertifiedBounds tries the decomposed bound (7).
void Delta0Bounds(pld_internal::Prepared* prepared, std::vector<ComponentPmfs>* dominant,
                  pld_internal::RealFft* fft, double tol, RawBounds* out) {
  if (!Delta0GapWide(out->delta0_upper, out->delta0_lower, tol)) return;
  Delta0Bound(*dominant, Bound::kLower, prepared->h, tol, fft, &out->delta0_lower);
  if (Delta0GapWide(out->delta0_upper, out->delta0_lower, tol)) {
    Delta0Bound(prepared->remove, Bound::kUpper, prepared->h, tol, fft, &out->delta0_upper);
  }
}

// The certified upper bound of the add direction where it can exceed the remove
// direction's `out->upper` (else its coarse-grid bound only), folded into *out (5).
Result<void> BoundAddDirection(const Event& event, const Query& query,
                               const PldOptions& options, ld tail_budget,
                               pld_internal::Prepared* prepared, pld_internal::RealFft* fft,
                               RawBounds* out) {
  const double tol = options.epsilon_tolerance;
  bool add_needed = true;
  if (prepared->h * kCoarseFactor <= 1) {
    PldOptions coarse_options = options;
    coarse_options.discretization_interval = prepared->h * kCoarseFactor;
    auto coarse = Prepare(event, Grid(coarse_options), tail_budget);
    if (!coarse.ok()) return coarse.error_value();
    auto add = BuildDirection(&*coarse, Direction::kAdd);
    if (!add.ok()) return add.error_value();
    const BoundRequest request{query, std::min(0.1, tol * kCoarseFactor * kCoarseFactor), 0,
                               StagingRule::kStepsOnly};
    auto add_upper = DirectionBound(**add, Bound::kUpper, coarse->h, request, fft, &out->points,
                                    &out->delta0_upper);
    if (!add_upper.ok()) return add_upper.error_value();
    add_needed = !(*add_upper <= out->upper);
    out->other_upper = *add_upper;
  }
  if (!add_needed) return OkResult();
  auto add = BuildDirection(prepared, Direction::kAdd);
  if (!add.ok()) return add.error_value();
  auto add_upper = DirectionBound(**add, Bound::kUpper, prepared->h, {query, tol}, fft,
                                  &out->points, &out->delta0_upper);
  if (!add_upper.ok()) return add_upper.error_value();
  if (*add_upper > out->upper) {
    out->other_upper = out->upper;
    out->upper = *add_upper;
    out->dominant = Direction::kAdd;
  } else {
    out->other_upper = *add_upper;
  }
  return OkResult();
}

// Where the combined optimistic PMFs leave a gap wider than the refinement target, the
// tangent-corrected ones alone (also certified, (3a)) are tried as well: they keep more
// of a narrow bulk's tail (e.g. q = 1e-4, sigma = 0.5, T = 1e4). The larger lower bound
// is kept.
void TryTangentLowerBound(std::vector<ComponentPmfs>* comps, double h, const Query& query,
                          double tol, pld_internal::RealFft* fft, RawBounds* out) {
  bool has_alt = false;
  for (const ComponentPmfs& c : *comps) has_alt = has_alt || !c.lower_alt.mass.empty();
  if (!(has_alt && out->upper - out->lower > 10 * static_cast<ld>(tol) * out->upper)) return;
  for (ComponentPmfs& c : *comps) {
    if (c.lower_alt.mass.empty()) continue;
    if (c.lower_alt.log_mass.size() != c.lower_alt.mass.size()) FillLogs(&c.lower_alt);
    std::swap(c.lower, c.lower_alt);
  }
  auto alt = DirectionBound(*comps, Bound::kLower, h, {query, tol, out->upper}, fft,
                            &out->points, &out->delta0_lower);
  for (ComponentPmfs& c : *comps) {
    if (!c.lower_alt.mass.empty()) std::swap(c.lower, c.lower_alt);
  }
  if (alt.ok()) out->lower = std::max(out->lower, *alt);
}

// Certified upper and lower bounds on eps(delta) or delta(eps) (both are "larger is less
// private"): the upper bound is the maximum over the two directions, the lower bound
// that of the direction with the larger upper bound. The exact value is at least that
// direction's exact value, which is within its gap of its upper bound, which is within
// the other direction's upper bound: nothing is lost beyond one gap.
// The add direction is first bounded on a coarse grid: when that certified upper bound
// is already at most the remove direction's, the add direction cannot change either
// reported number and its fine composition is skipped (for Poisson-subsampled Gaussians
// the remove direction dominates by far more than the coarse grid's error).
Result<RawBounds> CertifiedBoundsOnGrid(const Event& event, const Query& query,
                                        const PldOptions& options, ld tail_budget,
                                        bool with_delta0) {
  auto prepared = Prepare(event, Grid(options), tail_budget);
  if (!prepared.ok()) return prepared.error_value();
  const double tol = options.epsilon_tolerance;
  pld_internal::RealFft fft;
  RawBounds out{0, 0, prepared->h, 0};
  auto remove = BuildDirection(&*prepared, Direction::kRemove);
  if (!remove.ok()) return remove.error_value();
  auto remove_upper = DirectionBound(**remove, Bound::kUpper, prepared->h, {query, tol}, &fft,
                                     &out.points, &out.delta0_upper);
  if (!remove_upper.ok()) return remove_upper.error_value();
  out.upper = *remove_upper;
  if (!prepared->symmetric) {
    DPKIT_RETURN_IF_ERROR(
        BoundAddDirection(event, query, options, tail_budget, &*prepared, &fft, &out));
  }
  auto& comps = out.dominant == Direction::kRemove ? prepared->remove : prepared->add;
  auto lower = DirectionBound(comps, Bound::kLower, prepared->h, {query, tol, out.upper}, &fft,
                              &out.points, &out.delta0_lower);
  if (!lower.ok()) return lower.error_value();
  out.lower = *lower;
  TryTangentLowerBound(&comps, prepared->h, query, tol, &fft, &out);
  if (with_delta0) {
    Delta0Bounds(&*prepared, &comps, &fft, tol, &out);
  }
  // Where the dominant direction certifies no lower bound at all, the other direction's
  // (also a lower bound on the maximum, (5)) is tried: the two upper bounds can be close
  // (q = 1e-4, sigma = 1, T = 1e7, delta = 1e-15), and the other's lower bound may hold.
  if (!(out.lower > 0) && !prepared->symmetric) {
    const Direction other =
        out.dominant == Direction::kRemove ? Direction::kAdd : Direction::kRemove;
    auto other_comps = BuildDirection(&*prepared, other);
    if (other_comps.ok()) {
      auto other_lower = DirectionBound(**other_comps, Bound::kLower, prepared->h,
                                        {query, tol, out.upper}, &fft, &out.points);
      if (other_lower.ok()) out.lower = std::max(out.lower, *other_lower);
    }
  }
  return out;
}

// The automatic grid for the requested tolerance exceeds the limits (e.g. 1e8 steps with
// little noise): use a coarser one (both bounds stay certified; the gap shows the lost
// tightness), up to spacing 1. The grid-limit error states the points needed; the window
// scales as 1/h (the component grid at least as fast), so the next spacing should fit,
// with a margin.
Result<RawBounds> CoarsenUntilFits(const Event& event, const Query& query,
                                   const PldOptions& options, ld tail_budget, bool with_delta0,
                                   Result<RawBounds> bounds) {
  double h = bounds.ok() ? bounds->h : 0;
  const bool first_fits = bounds.ok();
  for (int round = 0; !bounds.ok() && round < 8; ++round) {
    if (bounds.error_value().code != ErrorCode::kGridLimit) return bounds;
    if (h == 0) {
      auto prepared = Prepare(event, Grid(options), tail_budget);
      if (!prepared.ok()) return prepared.error_value();
      h = prepared->h;
    }
    if (h >= 1) return bounds;
    const double need = static_cast<double>(bounds.error_value().grid_points);
    const double factor = std::max(2.0, 1.3 * need / static_cast<double>(kMaxGridPoints));
    h = std::min(1.0, factor * h);
    PldOptions coarser = options;
    coarser.discretization_interval = h;
    bounds = CertifiedBoundsOnGrid(event, query, coarser, tail_budget, with_delta0);
  }
  if (bounds.ok() && !first_fits) bounds->coarsened = true;
  return bounds;
}

// From this many compositions on, the automatic grid's window can exceed
// pld_internal::kMaxWindowPoints (its points grow about linearly in T: the tilted spread
// as sqrt(T), the automatic spacing as 1/sqrt(T)); an estimate must exceed the limit by
// kProbeMargin before the automatic grid is skipped.
constexpr double kProbeSteps = 5e4;
constexpr double kProbeMargin = 1.02;

// Many compositions on the automatic grid: the remove direction's window there, estimated
// from its components on a kCoarseFactor coarser grid (about a sixth of the work of building
// them on the automatic grid; EstimatedWindowPoints). Where the estimate exceeds the limit
// by kProbeMargin, the grid-limit error the automatic grid's composition would have given
// (with the estimated need), which CoarsenUntilFits turns into a coarser grid as before;
// else nullopt, and the automatic grid is tried. Not where the automatic grid's components
// would be composed in two stages (those windows are not estimated). A wrong guess costs
// tightness or time, never soundness: every grid's bounds are certified. Issue 16: q 1e-4, sigma 0.8, T 1e5 built 303,488 cells per
// PMF at spacing 3.9e-6 before its window (4.5 M points) failed.
std::optional<Error> AutomaticGridCannotFit(const Event& event, const Query& query,
                                            const PldOptions& options, ld tail_budget) {
  auto prepared = Prepare(event, Grid(options), tail_budget);
  if (!prepared.ok()) return std::nullopt;
  double total = 0;
  for (const auto& [m, count] : prepared->flat) total += count;
  const double h = prepared->h;
  if (total < kProbeSteps || h * kCoarseFactor > 1) return std::nullopt;
  // One component from kStagedSteps on: always two stages (PlanStages).
  if (prepared->flat.size() == 1 && total >= pld_internal::kStagedSteps) return std::nullopt;
  PldOptions coarse_options = options;
  coarse_options.discretization_interval = h * kCoarseFactor;
  auto coarse = Prepare(event, Grid(coarse_options), tail_budget);
  if (!coarse.ok()) return std::nullopt;
  auto comps = BuildDirection(&*coarse, Direction::kRemove);
  if (!comps.ok()) return std::nullopt;
  const double tol = options.epsilon_tolerance;
  // The deficit rule weakens on finer grids, but not predictably (q 1e-4, sigma 0.8, T 1e5:
  // T eta = 0.0140, 0.0123, 0.00005, 0.00099 at 6, 3, 1.5 and 1 times the automatic
  // spacing, against its threshold 0.01; q 1e-4, sigma 0.5: 0.347 ... 0.174): only a probe
  // 10x above it is taken to mean that the automatic grid would use two stages too.
  if (pld_internal::PlanStages(**comps, StagingRule::kWithDeficit, 10 * tol)) {
    return std::nullopt;
  }
  const auto points =
      pld_internal::EstimatedWindowPoints(**comps, Bound::kUpper, coarse->h, query, tol, h);
  const double need = points.ok()                                      ? *points
                      : points.error_value().code == ErrorCode::kGridLimit
                          ? points.error_value().grid_points
                          : 0;
  if (!(need > kProbeMargin * pld_internal::kMaxWindowPoints)) return std::nullopt;
  return pld_internal::GridLimitError(static_cast<int64_t>(need), pld_internal::kMaxWindowPoints,
                                      h);
}

// A wide gap with one component used many times whose bulk is narrow for the grid: the
// decomposed bounds (7) on the grid of *b, folded in where they apply. Returns whether
// they closed at least half of the gap between the bounds on epsilon (or delta): then the
// gap left is mostly their grids' discretisation, which a finer grid narrows.
// with_delta0: the lower bound's block laws also bound delta(0) (DecomposedBound).
bool TryDecomposed(const Event& event, const Query& query, const PldOptions& options,
                   ld tail_budget, bool with_delta0, RawBounds* b) {
  PldOptions at_grid = options;
  at_grid.discretization_interval = b->h;
  auto decomposed =
      DecomposedBoundsForEvent(event, Grid(at_grid), tail_budget, b->dominant,
                               {Bound::kLower, Bound::kUpper}, query, b->upper, with_delta0);
  if (!decomposed.ok() || !decomposed->has_value()) return false;
  const pld_internal::DecomposedResults& results = **decomposed;
  const ld lower_before = b->lower, upper_before = b->upper;
  b->delta0_lower = std::max(b->delta0_lower, std::min(results.delta0_lower, b->delta0_upper));
  if (results.lower.ok() && results.lower->has_value()) {
    b->lower = std::max(b->lower, **results.lower);
  }
  // The upper bound is for the dominant direction only; the reported upper bound stays
  // the maximum over both directions (5).
  if (results.upper.ok() && results.upper->has_value()) {
    b->upper = std::min(b->upper, std::max(**results.upper, b->other_upper));
  }
  return (b->lower - lower_before) + (upper_before - b->upper) >=
         0.5_ld * (upper_before - lower_before);
}

// with_delta0, where the gap on delta(0) is still wide after epsilon's grids and their
// decomposed bounds: the decomposed lower bound (7) of delta(0) itself, on the final grid
// (q = 1e-4, sigma = 0.5, T = 1e5, delta = 0.1, where epsilon = 0 needs no decomposition:
// [0.0329, 0.0872] from the compositions; the report then refined delta(0) on its own for
// twice the time of epsilon, issues 16 and 21). Not where epsilon's automatic grid did not
// fit (RawBounds::coarsened): there the decomposition's final composition does not fit
// either, and report.cc keeps the bounds it has.
void Delta0Decomposed(const Event& event, const PldOptions& options, ld tail_budget,
                      RawBounds* b) {
  // A lower bound cannot narrow an interval without an upper bound (report.cc then searches
  // delta(0) on its own, decomposition included).
  if (b->coarsened || !(b->delta0_upper < 1) ||
      !Delta0GapWide(b->delta0_upper, b->delta0_lower, options.epsilon_tolerance)) {
    return;
  }
  PldOptions at_grid = options;
  at_grid.discretization_interval = b->h;
  const Query zero{Query::Kind::kDeltaAtEpsilon, 0};
  auto decomposed = DecomposedBoundsForEvent(event, Grid(at_grid), tail_budget, b->dominant,
                                             {Bound::kLower}, zero, b->delta0_upper);
  if (!decomposed.ok() || !decomposed->has_value()) return;
  b->delta0_decomposed = true;
  const auto& lower = (*decomposed)->lower;
  if (lower.ok() && lower->has_value()) {
    b->delta0_lower = std::max(b->delta0_lower, std::min(**lower, b->delta0_upper));
  }
}

// Largest number of refinements of an automatically chosen grid, and the largest grid
// (points of a component or of the window) a refinement may reach.
constexpr int kMaxRefinements = 3;
constexpr int64_t kRefinementPoints = int64_t{1} << 20;

// Refines the grid while the gap shows that it was too coarse (see CertifiedBounds);
// returns whether a refinement stopped helping.
bool Refine(const Event& event, const Query& query, const PldOptions& options,
            ld tail_budget, bool with_delta0, Result<RawBounds>* bounds) {
  for (int round = 0; round < kMaxRefinements; ++round) {
    RawBounds& current = **bounds;
    const ld wanted = 10 * static_cast<ld>(options.epsilon_tolerance) * current.upper;
    const ld gap = current.upper - current.lower;
    if (!std::isfinite(current.upper) || current.upper <= 0 || gap <= wanted) break;
    double factor = static_cast<double>(
        std::max<ld>(0.7_ld * std::sqrt(wanted / gap), 1.0_ld / 30));
    // A grid past kRefinementPoints is not tried; refine as far as it allows instead
    // (stop only where that is less than a 0.8x step).
    factor = std::max(factor, static_cast<double>(current.points) / kRefinementPoints);
    if (factor > 0.8) break;
    if (current.h * factor < 1e-7) break;
    PldOptions finer = options;
    finer.discretization_interval = current.h * factor;
    auto refined = CertifiedBoundsOnGrid(event, query, finer, tail_budget, with_delta0);
    if (!refined.ok()) break;
    const bool progress = refined->upper - refined->lower < 0.8_ld * gap;
    // Both results are certified: keep the tighter side of each.
    KeepTighter(current, &*refined);
    *bounds = refined;
    if (!progress) return true;
  }
  return false;
}

// CertifiedBoundsOnGrid on the automatic grid, refined while the gap shows that it was
// too coarse: for eps(delta) the grid is refined until epsilon_upper - epsilon_lower <=
// 10 tolerance epsilon_upper, for delta(eps) until delta_upper - delta_lower <= 10
// tolerance delta_upper (the upper bound's own error is typically a tenth of the gap).
// The connect-the-dots errors are second order in the spacing, so the spacing is scaled
// by (wanted gap / gap)^{1/2}, with a 0.7 safety factor. A step is capped at the grid
// kRefinementPoints allows; refinement stops when that cap leaves less than a 0.8x step
// or when it stopped helping (on very fine grids the floating-point error allowances,
// which grow as the spacing shrinks, dominate). Every result is certified; the tightest
// upper and lower bounds seen are returned.
Result<RawBounds> CertifiedBounds(const Event& event, const Query& query,
                                  const PldOptions& options, ld tail_budget,
                                  bool with_delta0 = false) {
  if (options.discretization_interval > 0) {
    return CertifiedBoundsOnGrid(event, query, options, tail_budget, with_delta0);
  }
  const std::optional<Error> cannot_fit =
      AutomaticGridCannotFit(event, query, options, tail_budget);
  auto bounds = cannot_fit
                    ? Result<RawBounds>(*cannot_fit)
                    : CertifiedBoundsOnGrid(event, query, options, tail_budget, with_delta0);
  bounds = CoarsenUntilFits(event, query, options, tail_budget, with_delta0, std::move(bounds));
  // Both query kinds refine: for delta(eps) the gap is compared with tolerance * delta.
  if (!bounds.ok()) return bounds;
  const bool coarsened = bounds->coarsened;
  const double first_h = bounds->h;
  // The decomposed bound (7), before refining (it usually closes the gap, and then the
  // refinements, which cannot, are skipped).
  double decomposed_h = 0;  // grid of the last attempt (0: none)
  bool decomposed_helped = false;
  auto try_decomposed = [&](RawBounds* b) {
    if (!(std::isfinite(b->upper) && b->upper > 0 &&
          b->upper - b->lower > 10 * static_cast<ld>(options.epsilon_tolerance) * b->upper)) {
      return;
    }
    decomposed_h = b->h;
    decomposed_helped = TryDecomposed(event, query, options, tail_budget, with_delta0, b);
  };
  try_decomposed(&*bounds);
  const bool stalled = Refine(event, query, options, tail_budget, with_delta0, &bounds);
  // Where a finer grid did not help, the floating-point allowances (which grow as the
  // spacing shrinks) dominate, and a coarser grid may do better: e.g. q = 1e-4, sigma = 2,
  // 1e8 steps, whose default grid fits since the two-stage composition: [2.0916, 2.1888]
  // there, [2.1114, 2.1463] at 3x the spacing. One such grid is tried; both certified.
  if (stalled && first_h * 3 <= 1) {
    PldOptions coarser = options;
    coarser.discretization_interval = first_h * 3;
    auto other = CertifiedBoundsOnGrid(event, query, coarser, tail_budget, with_delta0);
    if (other.ok()) KeepTighter(*other, &*bounds);
  }
  // Still a wide gap (a finer grid since the first attempt): try (7) again, where the first
  // attempt closed at least half of the gap (TryDecomposed). Where it closed less, what
  // limits it is not the grid, and the second attempt gained little for its cost (issue 21,
  // T 1e7, sigma 0.3, delta 1e-15): at q 1e-4 (no lower bound certified) the first moved
  // the upper bound 494.6160 -> 494.4640 in 8 s, the second to 494.4192 in 7 s more; at
  // q 0.01 the first closed 35 % of [160353.0, 161252.0] in 15 s, the second moved the
  // bounds by 1.6 and 0.4 in 9 s more; for delta(0) at q 1e-4 neither certified anything.
  if (bounds->h < decomposed_h && decomposed_helped) try_decomposed(&*bounds);
  bounds->coarsened = coarsened;  // the refinements' results do not carry it
  if (with_delta0) Delta0Decomposed(event, options, tail_budget, &*bounds);
  return bounds;
}

// Replace-one events (sampling without replacement, internal/pld_replace_one.cc): *raw
// brackets the exact value of the analysis (C_p(f) composed), which may exceed the
// mechanism's; the lower bound on the mechanism is the certified lower bound of its
// explicit pair of datasets ((R4): RealizedPairEvent), computed where
// options.mechanism_lower_bound asks for it and else the trivial 0. *analysis_lower
// receives the analysis' lower bound (the mechanism's is one too: the analysis bounds the
// mechanism from above). Other events: *analysis_lower = raw->lower, nothing else changes.
Result<void> MechanismLowerBound(const Event& event, const Query& query,
                                 const PldOptions& options, ld tail_budget, bool with_delta0,
                                 RawBounds* raw, ld* analysis_lower) {
  *analysis_lower = raw->lower;
  auto realized = pld_internal::RealizedPairEvent(event);
  if (!realized.ok()) return realized.error_value();
  if (!realized->has_value()) return OkResult();
  ld lower = 0, delta0_lower = 0;
  if (options.mechanism_lower_bound) {
    auto pair = CertifiedBounds(**realized, query, options, tail_budget, with_delta0);
    // A failure leaves the trivial lower bounds (the upper bound does not depend on it).
    if (pair.ok()) {
      lower = std::min(pair->lower, raw->upper);
      delta0_lower = std::min(pair->delta0_lower, raw->delta0_upper);
    }
  }
  *analysis_lower = std::max(*analysis_lower, lower);
  raw->lower = lower;
  raw->delta0_lower = delta0_lower;
  return OkResult();
}

constexpr double kMinDelta = 1e-200;
// Largest epsilon at which PldDelta composes; above it the bound at this epsilon is
// returned (see PldDelta). At a spacing of 1 its window fits kMaxGridPoints.
constexpr double kMaxDeltaEpsilon = 1e6;

}  // namespace

Result<EpsilonBounds> PldEpsilon(const Event& event, double delta, const PldOptions& options) {
  if (!(delta > 0 && delta < 1)) {
    return Error{"delta must be in (0, 1), got " + FormatDouble(delta)};
  }
  // Below this the tail budgets (delta * 1e-7 / T) and the tilted window's scale factors
  // approach the limits of double/long double and the bounds can degrade to [0, inf].
  if (delta < kMinDelta) {
    return Error{"the pld accountant supports delta >= " + FormatDouble(kMinDelta) + ", got " +
                 FormatDouble(delta)};
  }
  const Query query{Query::Kind::kEpsilonAtDelta, delta};
  const ld tail_budget = static_cast<ld>(delta) * 1e-7_ld;
  auto raw = CertifiedBounds(event, query, options, tail_budget, options.with_delta0);
  if (!raw.ok()) return raw.error_value();
  ld analysis_lower = 0;
  DPKIT_RETURN_IF_ERROR(MechanismLowerBound(event, query, options, tail_budget,
                                            options.with_delta0, &*raw, &analysis_lower));
  EpsilonBounds out{static_cast<double>(raw->upper), static_cast<double>(raw->lower), raw->h};
  out.grid_coarsened = raw->coarsened;
  out.delta0_decomposed = raw->delta0_decomposed;
  // Rounding to double: keep the upper bound up and the lower bound down.
  // (0 is exact: the certified delta at eps = 0 is already <= delta.)
  if (std::isfinite(out.epsilon_upper) && raw->upper > 0) {
    out.epsilon_upper = std::nextafter(out.epsilon_upper, std::numeric_limits<double>::infinity());
  }
  out.epsilon_lower = std::max(0.0, std::nextafter(out.epsilon_lower, 0.0));
  out.epsilon_lower = std::min(out.epsilon_lower, out.epsilon_upper);
  out.analysis_lower = std::max(
      out.epsilon_lower,
      std::min(out.epsilon_upper,
               std::max(0.0, std::nextafter(static_cast<double>(analysis_lower), 0.0))));
  // delta(0): the upper bound rounded up (1 where none was certified), the lower one down.
  if (raw->delta0_upper < 1) {
    out.delta0_upper =
        std::min(1.0, std::nextafter(static_cast<double>(raw->delta0_upper), 2.0));
  }
  out.delta0_lower = std::min(
      out.delta0_upper, std::max(0.0, std::nextafter(static_cast<double>(raw->delta0_lower), 0.0)));
  // A NaN would be an arithmetic failure inside the accountant, never a bound.
  if (std::isnan(out.epsilon_upper) || std::isnan(out.epsilon_lower) ||
      std::isnan(out.analysis_lower)) {
    return Error{"internal error: the pld accountant's epsilon bounds are not numbers"};
  }
  return out;
}

Result<DeltaBounds> PldDelta(const Event& event, double epsilon, const PldOptions& options) {
  if (!(std::isfinite(epsilon) && epsilon >= 0)) {
    return Error{"epsilon must be finite and >= 0, got " + FormatDouble(epsilon)};
  }
  // Above kMaxDeltaEpsilon the loss window (epsilon / spacing points, at a spacing of at
  // most 1) no longer fits the grid limit, and at epsilon = 1e300 its size overflowed. delta
  // is nonincreasing in epsilon (delta(eps) = sup_S P[M(D) in S] - e^eps P[M(D') in S],
  // each term nonincreasing in eps; Dong, Roth, Su 2019, Prop. 2.12), so the certified
  // upper bound at kMaxDeltaEpsilon bounds delta(eps) for every larger eps; no lower bound
  // is certified there (0). Issue 21: eps = 1e300 answered in about a second.
  const bool capped = epsilon > kMaxDeltaEpsilon;
  const Query query{Query::Kind::kDeltaAtEpsilon, capped ? kMaxDeltaEpsilon : epsilon};
  auto raw = CertifiedBounds(event, query, options, 1e-30_ld);
  if (!raw.ok()) return raw.error_value();
  ld analysis_lower = 0;
  DPKIT_RETURN_IF_ERROR(
      MechanismLowerBound(event, query, options, 1e-30_ld, false, &*raw, &analysis_lower));
  if (capped) raw->lower = analysis_lower = 0;
  DeltaBounds out{static_cast<double>(raw->upper), static_cast<double>(raw->lower), raw->h};
  if (raw->upper > 0) out.delta_upper = std::min(1.0, std::nextafter(out.delta_upper, 2.0));
  out.delta_lower = std::min(out.delta_upper, std::max(0.0, std::nextafter(out.delta_lower, 0.0)));
  out.analysis_lower = std::max(
      out.delta_lower,
      std::min(out.delta_upper,
               std::max(0.0, std::nextafter(static_cast<double>(analysis_lower), 0.0))));
  if (std::isnan(out.delta_upper) || std::isnan(out.delta_lower) ||
      std::isnan(out.analysis_lower)) {
    return Error{"internal error: the pld accountant's delta bounds are not numbers"};
  }
  return out;
}

Result<std::vector<ComposedPld>> PessimisticComposedPlds(const Event& event, double tail_mass,
                                                         const PldOptions& options) {
  if (!(tail_mass > 0 && tail_mass <= 0.01)) {
    return Error{"tail_mass must be in (0, 0.01], got " + FormatDouble(tail_mass)};
  }
  auto prepared = Prepare(event, Grid(options), static_cast<ld>(tail_mass) * 1e-3_ld);
  if (!prepared.ok()) return prepared.error_value();
  for (Direction dir : {Direction::kRemove, Direction::kAdd}) {
    if (dir == Direction::kAdd && prepared->symmetric) continue;
    auto built = BuildDirection(&*prepared, dir);
    if (!built.ok()) return built.error_value();
  }
  std::vector<ComposedPld> out;
  pld_internal::RealFft fft;
  for (const auto* comps : {&prepared->remove, &prepared->add}) {
    if (comps->empty()) continue;
    // Untilted composition (lambda = 0 at target eps = -inf-ish): use delta(eps) target
    // at a very negative eps so that the tilt is 0 and the whole distribution is kept.
    auto composed = Compose(*comps, Bound::kUpper, prepared->h,
                            Query{Query::Kind::kDeltaAtEpsilon, -1e6}, /*tolerance=*/1e-6, &fft);
    if (!composed.ok()) return composed.error_value();
    ComposedPld pld;
    pld.interval = prepared->h;
    pld.min_index = composed->window_start;
    pld.masses.resize(composed->n);
    ld above = std::exp(composed->log_above_bound);
    for (int64_t j = 0; j < composed->n; ++j) {
      const ld l = static_cast<ld>(composed->window_start + j) * composed->h;
      if (!InSupport(*composed, composed->window_start + j)) continue;
      const ld v = (static_cast<ld>(composed->tilted[j]) + composed->entry_error) *
                   std::exp(composed->log_scale - composed->lambda * l);
      pld.masses[j] = static_cast<double>(std::max<ld>(v, 0) * (1 + 64 * kUnit));
    }
    pld.infinity_mass = static_cast<double>(std::min<ld>(1, composed->infinity_mass + above));
    out.push_back(std::move(pld));
  }
  return out;
}

}  // namespace dpkit::accounting
