#include "dpkit/accounting/internal/pld_staged_composition.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_cells.h"

namespace dpkit::accounting::pld_internal {

// ---------------------------------------------------------------------------------
// Two-stage composition (ComposeStaged): T = m T1 + r steps of one component.
//
// (6) The T-fold composition on the fine grid h needs a window of span ~ 12 sqrt(T) s / h
//     points (s: per-step tilted loss spread), ~6e5 for T = 1e6. Instead, the T1-fold
//     (T1 ~ sqrt(T)) and r-fold compositions are computed on the fine grid (windows of
//     ~ sqrt(T1) s / h points), re-discretised onto the grid of spacing H = k h
//     (k ~ sqrt(T1)/2) and composed there (m times and once): ~ 2 sqrt(T/T1) s / h points.
//     Accuracy: re-discretising adds per-step loss variance of order H^2 (connect-the-dots
//     moves mass at l in (a, b] to a and b, adding (l - a)(b - l) <= H^2/4), m times, i.e.
//     m H^2 ~ T h^2 / 4 in all: about a quarter of what the fine grid's T per-step
//     discretisations add (k is lowered further where the tolerance asks for it, see
//     ComposeStaged). The optimistic side: the tangent correction (3a) is first order in h
//     where the per-step loss is concentrated within a few cells (small q); the chain
//     (3b) keeps the masses there, and where the tangent PMFs are composed (3c) the small
//     windows let the grid refinement of CertifiedBounds reach spacings where the
//     compounded deficit T eta is small. On the T1-fold law, smooth on the H grid, the
//     second stage's own discretisation is second order.
//
//     Certification. Upper: the fine window entries plus entry_error are >= the exact
//     circular convolution, which is the linear one (a dominating PLD, by (1)) restricted
//     to the window plus non-negative extra mass (the aliased copies of the mass outside
//     it). The mass above the window is bounded by Chernoff (tilted, as in (4)) and put at
//     +inf; the mass below it is bounded by Chernoff on the untilted law (exact MGFs at
//     -s) and put at the window's first entry (P-mass moved to a larger loss dominates,
//     (2)): unlike in the final delta sum, where losses below the window are below eps
//     and do not count, here they meet the other factors' losses. A dominating PLD
//     plus a non-negative measure still bounds delta from above after any composition
//     (composition is bilinear and delta(eps) = integral of (1 - e^{eps - l})_+ >= 0).
//     Connect-the-dots of that measure onto the H grid dominates it (2, which holds for
//     any measure in a cell), so the second stage composes dominating components.
//     Lower: the exact circular entry exceeds the linear one by the aliased mass, at most
//     the tilted mass outside the window (tau), so entry - entry_error - tau (clamped at
//     0) is <= the linear tilted mass; the result is a sub-measure of a dominated PLD,
//     and sub-measures only lower delta after composition (same bilinearity). The
//     optimistic constructions (3a-c) applied to that measure on the H grid are dominated
//     by it (the chord-excess bound E = c d/(c + d) and the cell atoms of the chain hold
//     for any measure in a cell). Every
//     untilted weight is rounded up (upper) or down (lower) by an explicit allowance.
//     All masses of the T1-fold law that matter at the final tilt lambda are in the
//     first-stage window: it is tilted at the lambda of the whole composition and covers
//     all but `required` of the tilted mass, with required chosen so that the total
//     aliasing allowance of all m factors, m n1 tau, is far below the tolerance; and the
//     untilted mass above it, which each of the m factors puts at +inf (upper) or drops
//     (lower), is kept below 1e-4 tolerance delta / (m + 1) (delta estimated by its
//     Chernoff bound for delta(eps) queries). These only affect tightness.
// ---------------------------------------------------------------------------------

int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

Pmf Rediscretize(const Composed& c, Bound bound, int64_t k) {
  const bool upper = bound == Bound::kUpper;
  const ld h = c.h;
  // Coarse cell K is (K k h, (K + 1) k h]; fine entry g lies in cell FloorDiv(g - 1, k) at
  // offset r = g - K k in 1..k. With a = K k h, l = g h:
  //   c = A - e^a B = sum w (1 - e^{-(l - a)}),  d = e^{a + kh} B - A = sum w (e^{a+kh-l} - 1).
  std::vector<ld> fa(k + 1, 0), fb(k + 1, 0);
  for (int64_t r = 1; r <= k; ++r) {
    fa[r] = -std::expm1(-static_cast<ld>(r) * h);
    fb[r] = std::expm1(static_cast<ld>(k - r) * h);
  }
  const int64_t first_cell = FloorDiv(c.window_start - 1, k);
  const int64_t last_cell = FloorDiv(c.window_start + c.n - 2, k);
  // Two empty cells on top keep the optimistic top handling away from mass.
  const int64_t cells = last_cell - first_cell + 1 + 2;
  std::vector<ld> cc(cells, 0), dd(cells, 0);
  for (int64_t j = 0; j < c.n; ++j) {
    const ld v = upper ? static_cast<ld>(c.tilted[j]) + c.entry_error
                       : static_cast<ld>(c.tilted[j]) - c.entry_error - c.tilted_outside;
    const int64_t g = c.window_start + j;
    // Upper: below the support there is no mass, at the entry nor below the window.
    if (!(v > 0) || (upper && g < c.support_lo)) continue;
    const ld l = static_cast<ld>(g) * h;
    // Untilted weight v exp(K - lambda l): the exponent's rounding (|K| + |lambda l| + 1
    // ulps) and exp's own (a few ulps) are covered by `rel`.
    const ld rel =
        (std::fabs(c.log_scale) + std::fabs(c.lambda * l) + 64) * 4 * kLdUnit;
    ld w = upper && g > c.support_hi
               ? 0
               : v * std::exp(c.log_scale - c.lambda * l) * (upper ? 1 + rel : 1 - rel);
    // Upper: the mass below the window moves up to its first entry (dominating, (2)).
    if (upper && j == 0) w += std::exp(c.log_below_bound) * (1 + 8 * kUnit);
    const int64_t cell = FloorDiv(g - 1, k);
    const int64_t r = g - cell * k;
    cc[cell - first_cell] += w * fa[r];
    dd[cell - first_cell] += w * fb[r];
  }
  // Each cell sums at most k non-negative products (fa, fb within 4 ulps each).
  const ld rel = static_cast<ld>(2 * k + 16) * kLdUnit;
  CellBounds bounds{std::vector<ld>(cells), std::vector<ld>(cells), std::vector<ld>(cells),
                    std::vector<ld>(cells)};
  for (int64_t i = 0; i < cells; ++i) {
    bounds.c_up[i] = cc[i] * (1 + rel);
    bounds.d_up[i] = dd[i] * (1 + rel);
    bounds.c_lo[i] = cc[i] * (1 - rel);
    bounds.d_lo[i] = dd[i] * (1 - rel);
  }
  Pmf up, lo;
  const ld above =
      upper ? (c.infinity_mass + std::exp(c.log_above_bound)) * (1 + 8 * kUnit) : 0;
  CellsToPmfs(first_cell, static_cast<double>(k * h), bounds, 0, above, &up, &lo);
  if (!upper) lo.infinity_mass = c.infinity_mass * (1 - 8 * kUnit);
  Pmf& out = upper ? up : lo;
  FillLogs(&out);
  return std::move(out);
}

std::optional<StagePlan> PlanStages(const std::vector<ComponentPmfs>& comps, StagingRule rule,
                                    double tolerance) {
  if (comps.size() != 1) return std::nullopt;
  const double count = comps[0].count;
  if (!(count >= kMinStagedSteps && count <= 9e15 && count == std::floor(count))) {
    return std::nullopt;
  }
  if (count < kStagedSteps) {
    if (rule != StagingRule::kWithDeficit) return std::nullopt;
    // The tangent PMF's deficit decides even where the combined PMF (3c), which keeps the
    // bulk's mass, is composed: the two stages also keep the windows of the upper bound
    // and of the add direction small enough (e.g. q = 1e-4, sigma = 0.5, T = 1e5, delta(0):
    // in one stage the add direction's window misses its heavy lower tail, delta <= 1).
    ld deficit = 0;
    for (const Pmf* lower : {&comps[0].lower, &comps[0].lower_alt}) {
      if (lower->mass.empty()) continue;
      ld total = lower->infinity_mass;
      for (const ld v : lower->mass) total += v;
      deficit = std::max(deficit, 1 - total);
    }
    if (!(static_cast<ld>(count) * deficit >
          kStagedDeficitPerTolerance * static_cast<ld>(tolerance))) {
      return std::nullopt;
    }
  }
  StagePlan plan;
  plan.t1 = std::llround(std::sqrt(count));
  plan.k = static_cast<int64_t>(std::floor(std::sqrt(static_cast<double>(plan.t1)) / 2));
  if (plan.k < 2) return std::nullopt;
  return plan;
}

Result<Composed> ComposeStaged(const std::vector<ComponentPmfs>& comps, Bound bound, double h,
                               const Query& query, double tolerance, StagePlan plan,
                               RealFft* fft, int64_t* points) {
  const bool target_is_eps = query.at_epsilon();
  const double target = query.value;
  const int64_t t1 = plan.t1;
  int64_t k = plan.k;
  const int64_t total = static_cast<int64_t>(comps[0].count);
  const int64_t m = total / t1, r = total - m * t1;
  const Pmf& pmf = comps[0].of(bound);
  // The tilt and the eps estimate come from the pessimistic PMF for both bounds: the
  // optimistic one's mass deficit (compounded over T steps) can distort its Chernoff
  // estimates badly (sigma = 0.5, q = 0.01, T = 1e6: lambda 0.0008, "eps" -2e5), and any
  // tilt gives certified results.
  const Pmf& pessimistic = comps[0].upper.mass.empty() ? pmf : comps[0].upper;
  const std::vector<Coarse> coarse = {Coarsen(pessimistic, h)};
  StageOptions stage;
  stage.lambda = ChooseTilt(coarse, {comps[0].count}, query);
  stage.cover = WindowCover::kBulkOnly;
  // Grid factor for the tolerance: the second stage adds loss variance <= m (k h)^2 / 4
  // (connect-the-dots, (6)), which near the saddle point lambda raises log delta by about
  // lambda^2 m (k h)^2 / 8 and so eps by lambda m (k h)^2 / 8. Keep that at a quarter of
  // the tolerance: (k h)^2 <= 2 tolerance eps / (lambda m), eps from the target or its
  // Chernoff estimate. (Heavily tilted laws, e.g. eps = 0.0025 at sigma = 20, q = 1e-4,
  // T = 1e6, delta = 1e-3, lambda ~ 750, then stay in one stage.)
  {
    const Cumulants kc = CoarseCumulants(coarse, {comps[0].count}, stage.lambda);
    const ld eps = target_is_eps ? static_cast<ld>(target)
                                 : (kc.k - std::log(static_cast<ld>(target))) / stage.lambda;
    if (stage.lambda > 0) {
      const ld k_tol =
          std::sqrt(std::max<ld>(2 * static_cast<ld>(tolerance) * eps, 0) /
                    (stage.lambda * static_cast<ld>(m))) / h;
      if (k_tol < static_cast<ld>(k)) k = static_cast<int64_t>(std::floor(k_tol));
    }
    if (k < 2) return Compose(comps, bound, h, query, tolerance, fft);
  }
  // Aliasing allowance: m factors with at most 2^22 window entries each lose at most
  // m 2^22 tau of tilted mass; keep that at 1e-2 tolerance.
  stage.required = std::max<ld>(1e-2_ld * tolerance / (static_cast<ld>(m) * 4194304.0_ld), 1e-300_ld);
  // The untilted mass above a first-stage window is put at +inf (upper) or dropped
  // (lower) in each of the m + 1 factors: keep the total at 1e-4 tolerance delta, with
  // delta estimated by its Chernoff bound e^{K(lambda) - lambda eps} for delta(eps).
  const ld log_delta =
      target_is_eps
          ? CoarseCumulants(coarse, {comps[0].count}, stage.lambda).k -
                stage.lambda * static_cast<ld>(target)
          : std::log(static_cast<ld>(target));
  stage.log_above_allowed =
      log_delta + std::log(1e-4_ld * tolerance) - std::log(static_cast<ld>(m) + 1);
  std::vector<ComponentPmfs> second;
  for (const int64_t count : {t1, r}) {
    if (count == 0) continue;
    std::vector<ComponentPmfs> first(1);
    first[0].of(bound) = pmf;
    first[0].count = static_cast<double>(count);
    auto composed = Compose(first, bound, h, query, tolerance, fft, &stage);
    if (!composed.ok()) return composed.error_value();
    *points = std::max(*points, composed->n);
    ComponentPmfs c;
    c.of(bound) = Rediscretize(*composed, bound, k);
    c.count = count == t1 ? static_cast<double>(m) : 1.0;
    second.push_back(std::move(c));
  }
  // The second stage keeps the tilt (the saddle point of the same composition).
  stage.cover = WindowCover::kTarget;
  return Compose(second, bound, static_cast<double>(k) * h, query, tolerance, fft, &stage);
}

}  // namespace dpkit::accounting::pld_internal
