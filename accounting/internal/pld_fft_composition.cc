#include "dpkit/accounting/internal/pld_fft_composition.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_search.h"

namespace dpkit::accounting::pld_internal {

// (4) Composition by FFT with exponential tilting. For lambda >= 0 the tilted PMF
//     p~_i = p_i e^{lambda eps_i} / M(lambda) composes to the tilted composition
//     (tilting commutes with convolution), so the composed PMF is
//     c_j = c~_j exp(K(lambda) - lambda eps_j), K = sum_c T_c log M_c(lambda).
//     lambda is chosen at the saddle point of delta(eps), so the tail that determines
//     delta is the bulk of the tilted distribution and the absolute FFT error there is
//     a RELATIVE error of delta (this is what keeps delta ~ 1e-15 accurate).
//     The circular convolution of length N adds to each window entry the mass of the
//     linear convolution at the same position mod N (aliasing). Upper bound: aliasing
//     only adds non-negative mass, and the untilted mass above the window is bounded by
//     Chernoff: P(S > B) <= exp(-(lambda+s) B + K(lambda+s)). Lower bound: the aliased
//     mass at entries >= eps is at most tau e^{K(lambda) - lambda eps}, tau = tilted mass
//     outside the window (Chernoff on both sides).
//     Floating point: forward FFT error per frequency <= eta ceil(log2 N) sqrt(N) ||x||_2
//     (Higham 2002, Thm. 24.2, with eta = 16 u covering kissfft's radix-2/3/4/5 stages),
//     propagated through the power by |a^T - b^T| <= T |a - b| max(|a|,|b|)^{T-1},
//     exp/log rounding u T (|log|z|| + pi) |z|^T, and the inverse FFT bound again. The
//     per-entry bound is added to (upper) or subtracted from (lower) every entry.
//     Component PMFs are computed in long double from complementary CDFs; each cell
//     mass carries an explicit error bound (256 ulps of the CDF values used), added to
//     the pessimistic masses and subtracted from the optimistic ones; for the Gaussian
//     base, cells whose moments that leaves too uncertain are also enclosed by quadrature
//     (2b). The ulp is kLdUnit (that of double under Emscripten, whose long double
//     functions compute in double).
//     Frequencies whose bound (|X| + e)^T is below e^-700 are set to 0 and that bound is
//     added to the error sum (Compose). The untilted weights of the delta curve carry
//     256 double ulps each (MakeCurve), and DeltaAt adds/subtracts that relative error of
//     BOTH terms of s1 - e^eps s2 (not of their difference, which may cancel).

ld LogMgf(const Pmf& pmf, double h, ld t) {
  const int64_t n = static_cast<int64_t>(pmf.log_mass.size());
  ld mx = -std::numeric_limits<ld>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    mx = std::max(mx, pmf.log_mass[i] + t * static_cast<ld>(pmf.min_index + i) * h);
  }
  if (!std::isfinite(mx)) return -std::numeric_limits<ld>::infinity();
  ld s = 0;
  const double base = static_cast<double>(static_cast<ld>(pmf.min_index) * h * t - mx);
  const double step = static_cast<double>(t * h);
  for (int64_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(pmf.log_mass[i]) + base + step * static_cast<double>(i);
    if (e > -745) s += std::exp(e);
  }
  return mx + std::log(s) + 1e-13_ld;  // + rounding allowance (upper bound on log M)
}

Coarse Coarsen(const Pmf& pmf, double h) {
  Coarse c;
  const int64_t n = static_cast<int64_t>(pmf.mass.size());
  const int64_t block = std::max<int64_t>(1, n / 1024);
  for (int64_t i = 0; i < n; i += block) {
    ld s = 0, w = 0;
    const int64_t e = std::min(n, i + block);
    for (int64_t j = i; j < e; ++j) {
      if (pmf.mass[j] <= 0) continue;
      s += pmf.mass[j];
      w += pmf.mass[j] * static_cast<ld>(pmf.min_index + j);
    }
    if (s > 0) {
      c.loss.push_back(static_cast<double>(w / s * h));
      c.log_mass.push_back(static_cast<double>(std::log(s)));
    }
  }
  return c;
}

Cumulants CoarseCumulants(const std::vector<Coarse>& coarse, const std::vector<double>& counts,
                          ld t) {
  Cumulants out{0, 0, 0};
  const double td = static_cast<double>(t);
  for (size_t c = 0; c < coarse.size(); ++c) {
    const Coarse& co = coarse[c];
    double mx = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < co.loss.size(); ++i) mx = std::max(mx, co.log_mass[i] + td * co.loss[i]);
    double s0 = 0, s1 = 0, s2 = 0;
    for (size_t i = 0; i < co.loss.size(); ++i) {
      const double w = std::exp(co.log_mass[i] + td * co.loss[i] - mx);
      s0 += w;
      s1 += w * co.loss[i];
      s2 += w * co.loss[i] * co.loss[i];
    }
    const double mean = s1 / s0;
    out.k += counts[c] * (mx + std::log(s0));
    out.k1 += counts[c] * mean;
    out.k2 += counts[c] * std::max(s2 / s0 - mean * mean, 0.0);
  }
  return out;
}

int64_t FftSize(int64_t n) {
  int64_t best = std::numeric_limits<int64_t>::max();
  for (int64_t p5 = 1; p5 < 2 * n + 8; p5 *= 5) {
    for (int64_t p3 = p5; p3 < 2 * n + 8; p3 *= 3) {
      int64_t v = 4 * p3;
      while (v < n) v *= 2;
      best = std::min(best, v);
    }
  }
  return best;
}

ld ChooseTilt(const std::vector<Coarse>& coarse, const std::vector<double>& counts,
              const Query& query) {
  const bool target_is_eps = query.at_epsilon();
  const double target = query.value;
  auto objective = [&](ld t) -> ld {
    const Cumulants k = CoarseCumulants(coarse, counts, t);
    if (target_is_eps) return k.k - t * static_cast<ld>(target);
    return (k.k - std::log(static_cast<ld>(target))) / t;
  };
  // Scan geometrically, then golden-section refine around the best. Both objectives are
  // unimodal in t >= 0: K(t) - t eps is convex (K, the log of a sum of exponentials of t, is);
  // (K(t) - log delta) / t has derivative (t K' - K + log delta) / t^2, whose numerator has
  // derivative t K'' >= 0, so it changes sign once. Once a finite value rises above the
  // previous finite one, no later grid point can be lower, and the scan stops there (the
  // best point is the one the whole scan would find; K is evaluated ~1000 times per tilt).
  ld best_t = 0, best_v = target_is_eps ? objective(0) : std::numeric_limits<ld>::infinity();
  ld previous = best_v;
  for (ld t = 1e-3_ld; t <= 1e4_ld; t *= 1.25_ld) {
    const ld v = objective(t);
    if (!std::isfinite(v)) continue;
    if (v < best_v) {
      best_v = v;
      best_t = t;
    }
    if (std::isfinite(previous) && v > previous) break;
    previous = v;
  }
  // Tilts below 1e-3 where they are better (a composed loss spread of ~1e4 with delta near
  // 0.1 wants ~1e-4: sigma = 0.3, T = 1e7; a tilt 8x too large leaves the untilted bulk
  // below the FFT's error floor, and the lower bound kept 1 % of the mass, epsilon >= 0).
  // Only a strictly better value moves best_t, so larger optima are unchanged.
  if (best_t == 1e-3_ld) {
    for (ld t = 1e-3_ld / 1.25_ld; t >= 1e-7_ld; t /= 1.25_ld) {
      const ld v = objective(t);
      if (!(std::isfinite(v) && v < best_v)) break;
      best_v = v;
      best_t = t;
    }
  }
  if (best_t > 0) best_t = GoldenSectionMinimum(best_t / 1.25_ld, best_t * 1.25_ld, objective, 40);
  return best_t;
}

namespace {

// Support (see (4)): the linear composition has no mass outside the grid indices
// [sum_c T_c a_c, sum_c T_c b_c] (a_c, b_c: component c's lowest and highest index of
// positive mass), so window entries outside count as 0 in the upper bound (0 is the exact
// linear mass there; aliased mass is never needed; the lower bound keeps its entries, which
// are below the circular ones, and subtracts the aliasing as before). Otherwise the
// per-entry error bound, untilted by e^{K - lambda l}, puts spurious mass at the far end of
// a wide window (q = 1e-6, sigma = 0.3, T = 1e7, delta = 0.1: a first-stage window (6)
// reaching 120 below the support, an upper PMF of total mass 4e16, epsilon <= 8.70; now
// 0.24). The bounds are rounded outwards (counts up to 1e15 times indices up to 2^31 can
// exceed a long double's 64-bit mantissa).
void SetSupport(const std::vector<ComponentPmfs>& comps, Bound bound, Composed* c) {
  ld lo = 0, hi = 0;
  for (const ComponentPmfs& comp : comps) {
    const Pmf& pmf = comp.of(bound);
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < static_cast<int64_t>(pmf.mass.size()); ++i) {
      if (pmf.mass[i] > 0) {
        if (first < 0) first = i;
        last = i;
      }
    }
    if (first < 0) continue;
    lo += static_cast<ld>(comp.count) * static_cast<ld>(pmf.min_index + first);
    hi += static_cast<ld>(comp.count) * static_cast<ld>(pmf.min_index + last);
  }
  lo -= std::fabs(lo) * 1e-15_ld + 2;
  hi += std::fabs(hi) * 1e-15_ld + 2;
  if (lo > -9e18_ld) c->support_lo = static_cast<int64_t>(std::floor(lo));
  if (hi < 9e18_ld) c->support_hi = static_cast<int64_t>(std::ceil(hi));
}

// The components of one Compose call and what is derived from them before the window is
// chosen: the coarse laws, the tilt, the location of the tilted law and of the target.
struct ComposeContext {
  const std::vector<ComponentPmfs>& comps;
  Bound bound;
  double h;
  std::vector<Coarse> coarse;
  std::vector<double> counts;
  ld log_no_inf = 0;   // log P(no component at +inf)
  ld lambda = 0;       // the tilt
  ld k_exact = 0;      // K(lambda) from the exact MGFs
  ld centre = 0, spread = 0;  // mean and (padded) standard deviation of the tilted law
  ld target_eps = 0;   // the loss whose region the window must cover as well
  const StageOptions* stage;
  std::vector<ld> log_mgf = {};  // each component's log MGF at lambda (LogMgf)
  bool bulk_only() const { return stage != nullptr && stage->cover == WindowCover::kBulkOnly; }
  const Pmf& pmf(const ComponentPmfs& c) const { return c.of(bound); }
  // CoarseCumulants at the tilts every LogTiltedTail search starts from (lambda, and
  // lambda + side 1e-3 and lambda + side s_max on each side), computed once: the window
  // search asks for them on every width it tries (each a deterministic function of its
  // tilt, so a stored value is the one a new call would return).
  mutable std::vector<std::pair<ld, Cumulants>> cumulants_at = {};
  Cumulants CumulantsAt(ld t) const {
    for (const auto& [tilt, k] : cumulants_at) {
      if (tilt == t) return k;
    }
    const Cumulants k = CoarseCumulants(coarse, counts, t);
    if (cumulants_at.size() < 16) cumulants_at.emplace_back(t, k);
    return k;
  }
};

// Whether LogTiltedTail returns a certified bound (exact MGFs) or an estimate (coarse
// cumulants, cheap: for sizing the window).
enum class TailEstimate { kCoarse, kCertified };

// Chernoff bound on the tilted composed mass above `b` (side = +1) or below `b`
// (side = -1), as a log: min over s > 0 of -side s b + K(lambda + side s) - K(lambda).
// The minimising s is located on the coarse cumulants; the bound itself is evaluated
// with exact MGFs at that s and two neighbours (any s gives a valid bound).
ld LogTiltedTail(const ComposeContext& ctx, ld lambda, ld log_k_lambda, ld b, int side,
                 TailEstimate estimate) {
  const std::vector<Coarse>& coarse = ctx.coarse;
  const std::vector<double>& counts = ctx.counts;
  // The exponent -side s b + K(lambda + side s) is convex in s; its minimiser solves
  // K'(lambda + side s) = b, found by safeguarded Newton steps (the derivative of the slope
  // in s is K'' >= 0) inside a bracket over [1e-3, 1e4] (any s gives a valid bound, so the
  // search only needs to be good, not exact).
  auto value = [&](ld s) {
    return -side * s * b + CoarseCumulants(coarse, counts, lambda + side * s).k - log_k_lambda;
  };
  ld s_max = 1e4_ld;
  if (side < 0) s_max = std::min<ld>(s_max, lambda + 1e4_ld);
  ld lo = 1e-3_ld, hi = s_max;
  {
    const Cumulants at_lo = ctx.CumulantsAt(lambda + side * lo);
    // Slope at s -> 0 non-negative: the minimum is at s -> 0, only the trivial bound.
    if (side * (at_lo.k1 - b) >= 0) return 0;
  }
  ld best_s;
  if (side * (ctx.CumulantsAt(lambda + side * hi).k1 - b) <= 0) {
    best_s = hi;
  } else {
    const Cumulants at0 = ctx.CumulantsAt(lambda);
    ld s = at0.k2 > 0 ? std::fabs(b - at0.k1) / at0.k2 : std::sqrt(lo * hi);
    if (!(s > lo && s < hi)) s = std::sqrt(lo * hi);
    for (int it = 0; it < 40 && hi > lo * (1 + 1e-4_ld); ++it) {
      const Cumulants c = CoarseCumulants(coarse, counts, lambda + side * s);
      const ld slope = side * (c.k1 - b);
      if (slope < 0) lo = s; else hi = s;
      if (std::fabs(slope) <= 1e-4_ld * std::sqrt(std::max<ld>(c.k2, 0))) break;
      ld next = c.k2 > 0 ? s - slope / c.k2 : 0;
      if (!(next > lo && next < hi)) next = std::sqrt(lo * hi);
      s = next;
    }
    best_s = std::min(std::max(s, lo), hi);
  }
  const ld best_v = value(best_s);
  if (!(std::isfinite(best_v) && best_v < 0)) return 0;
  if (estimate == TailEstimate::kCoarse) return best_v;  // estimate only, not a bound
  ld best = 0;  // log(1): the trivial bound
  for (ld f : {0.9_ld, 1.0_ld, 1.1_ld}) {
    const ld s = f * best_s;
    ld k = 0;
    for (const ComponentPmfs& c : ctx.comps) {
      k += c.count * LogMgf(ctx.pmf(c), ctx.h, lambda + side * s);
    }
    if (std::isfinite(k)) best = std::min(best, -side * s * b + k - log_k_lambda);
  }
  return best;
}

// The tilt, the cumulants at it and the target's location (see Compose).
ComposeContext MakeContext(const std::vector<ComponentPmfs>& comps, Bound bound, double h,
                           const Query& query, const StageOptions* stage) {
  const bool target_is_eps = query.at_epsilon();
  const double target = query.value;
  ComposeContext ctx{comps, bound, h, {}, {}, 0, 0, 0, 0, 0, 0, stage};
  for (const ComponentPmfs& c : comps) {
    const Pmf& pmf = ctx.pmf(c);
    ctx.coarse.push_back(Coarsen(pmf, h));
    ctx.counts.push_back(c.count);
    ctx.log_no_inf += c.count * std::log1p(-std::min<ld>(pmf.infinity_mass, 1));
  }
  const ld lambda = stage != nullptr ? stage->lambda : ChooseTilt(ctx.coarse, ctx.counts, query);
  const Cumulants kl = ctx.CumulantsAt(lambda);
  ld centre = kl.k1;
  ld spread = std::sqrt(kl.k2) + 10 * h;
  // The region above the target must be in the window as well.
  ld target_eps;
  if (ctx.bulk_only()) {
    target_eps = centre;
  } else if (target_is_eps) {
    target_eps = target;
  } else {
    target_eps = lambda > 0 ? (kl.k - std::log(static_cast<ld>(target))) / lambda : centre;
  }
  // Losses far below the bulk need not be resolved: delta sums over the whole window.
  target_eps = std::max(target_eps, centre - 20 * spread);
  // Exact cumulant at lambda (certified quantities use exact MGFs).
  ld k_exact = 0;
  for (const ComponentPmfs& c : comps) {
    ctx.log_mgf.push_back(LogMgf(ctx.pmf(c), h, lambda));
    k_exact += c.count * ctx.log_mgf.back();
  }
  ctx.lambda = lambda;
  ctx.k_exact = k_exact;
  ctx.centre = centre;
  ctx.spread = spread;
  ctx.target_eps = target_eps;
  return ctx;
}

// A window of the composed law: grid indices start, ..., start + n - 1 (n the FFT size),
// with certified Chernoff bounds on the tilted mass outside it (tau) and above it.
struct Window {
  int64_t start, n;
  ld lo_edge, hi_edge;  // the losses of the first and the last entry
  ld log_above;         // log of the tilted mass above the window
  ld tau;               // tilted mass outside the window
};

// The window's grid range for a half-width (in spreads).
void WindowEdges(const ComposeContext& ctx, ld w, int64_t* start, int64_t* need) {
  const ld a = std::min(ctx.centre, ctx.target_eps) - w * ctx.spread - 2 * ctx.h;
  const ld b = std::max(ctx.centre, ctx.target_eps) + w * ctx.spread + 2 * ctx.h;
  *start = static_cast<int64_t>(std::floor(a / ctx.h));
  *need = static_cast<int64_t>(std::ceil(b / ctx.h)) - *start + 1;
}

// Whether the coarse-cumulant estimates (not bounds) of the tails outside the window of
// half-width w miss the requirements. First stage: the untilted mass above the window
// goes to +inf in every one of the m factors (upper) or is dropped (lower), so it must
// also be small against delta.
bool WindowMisses(const ComposeContext& ctx, ld w, ld required, ld log_above_allowed) {
  int64_t start, need;
  WindowEdges(ctx, w, &start, &need);
  const int64_t n = FftSize(need);
  const ld hi_edge = static_cast<ld>(start + n - 1) * ctx.h;
  const ld log_above =
      LogTiltedTail(ctx, ctx.lambda, ctx.k_exact, hi_edge, +1, TailEstimate::kCoarse);
  const ld below = std::exp(LogTiltedTail(ctx, ctx.lambda, ctx.k_exact,
                                          static_cast<ld>(start) * ctx.h, -1,
                                          TailEstimate::kCoarse));
  return std::exp(log_above) + below > 0.5_ld * required ||
         ctx.k_exact - ctx.lambda * hi_edge + log_above > log_above_allowed - 1;
}

// Chooses the window: a half-width (in spreads) whose coarse estimates meet the aliasing
// requirement, then certified with exact MGFs (a larger window is tried if the certified
// bound misses; the last attempt is kept whatever its bound, which is accounted for).
// Half-width of the window in tilted standard deviations: ~5.5 is enough for a near-
// Gaussian tilted law at tolerance 1e-4; the Chernoff bounds decide. Start from the
// Gaussian estimate of the half-width that meets the requirement (z with e^{-z^2/2} =
// requirement), slightly reduced.
// Where ChooseWindow only estimates (EstimatedWindowPoints): the spacing of the grid whose
// window size is wanted, finer than the components' own.
struct SizeOnly {
  double h;
};

// sizing: nullptr for the window itself; else only the size (Window::n, or the grid-limit
// error) its width search would reach on the finer grid, from the coarse estimates alone.
Result<Window> ChooseWindow(const ComposeContext& ctx, ld required, ld log_above_allowed,
                            const SizeOnly* sizing = nullptr) {
  const double h = ctx.h;
  // The window's points on the grid whose size is wanted: the same need, or the same span
  // on the finer grid.
  const auto points = [&](int64_t need) -> int64_t {
    if (sizing == nullptr) return need;
    return static_cast<int64_t>(std::ceil(static_cast<double>(need) * (h / sizing->h)));
  };
  ld width = std::max<ld>(4, 0.95_ld * std::sqrt(2 * std::log(1 / required)));
  auto misses = [&](ld w) { return WindowMisses(ctx, w, required, log_above_allowed); };
  ld failed_width = 0;  // largest half-width whose estimate missed
  // Small steps first (near-Gaussian laws), then large ones (skewed laws of few
  // compositions, e.g. T = 1 with a small sampling rate, have far heavier upper tails).
  for (int attempt = 0; attempt < 16; ++attempt, width *= attempt < 6 ? 1.07_ld : 1.5_ld) {
    const bool last = attempt == 15;
    {
      int64_t start, need;
      WindowEdges(ctx, width, &start, &need);
      if (points(need) > kMaxWindowPoints) {
        return GridLimitError(points(need), kMaxWindowPoints, sizing ? sizing->h : h);
      }
    }
    if (!last) {
      if (misses(width)) {
        failed_width = std::max(failed_width, width);
        continue;
      }
      // After a large step (skewed laws), bisect back towards the smallest half-width
      // whose estimate meets the requirement: the FFT cost is linear in it.
      if (failed_width > 0 && width > 1.2_ld * failed_width) {
        width = Bisect<ld>(
                    failed_width, width, [&](ld mid) { return !misses(mid); },
                    [](ld, ld) { return false; }, 5)
                    .hi;
      }
    }
    Window win;
    int64_t need;
    WindowEdges(ctx, width, &win.start, &need);
    if (sizing != nullptr) {
      win.n = points(need);
      return win;
    }
    if (need > kMaxWindowPoints) return GridLimitError(need, kMaxWindowPoints, h);
    win.n = FftSize(need);
    win.lo_edge = static_cast<ld>(win.start) * h;
    win.hi_edge = static_cast<ld>(win.start + win.n - 1) * h;
    win.log_above = LogTiltedTail(ctx, ctx.lambda, ctx.k_exact, win.hi_edge, +1,
                                  TailEstimate::kCertified);
    const ld log_below = LogTiltedTail(ctx, ctx.lambda, ctx.k_exact, win.lo_edge, -1,
                                       TailEstimate::kCertified);
    win.tau = std::exp(win.log_above) + std::exp(log_below);
    if ((win.tau > required ||
         ctx.k_exact - ctx.lambda * win.hi_edge + win.log_above > log_above_allowed) &&
        !last) {
      continue;
    }
    return win;
  }
  return Error{"could not bound the aliasing of the privacy loss window"};
}

// The spectrum of the composition, accumulated over the components: per frequency, the
// log of the power's modulus and its phase, and what its error bound needs.
// The sums are written, not zero-filled and added to, by the first component (x + 0 = x),
// and never read at a dead frequency: filling 80 bytes of long double per frequency cost
// as much as the FFTs on the decomposed bound's large windows (q 1e-6, sigma 30, T 1e7).
struct Spectrum {
  explicit Spectrum(int64_t nf)
      : log_magnitude(new ld[nf]), relative_error(new ld[nf]), log_abs_log(new ld[nf]),
        phase(new ld[nf]), log_mod(new ld[nf]), dead(nf, 0) {}
  std::unique_ptr<ld[]> log_magnitude;   // sum_c T_c log(|X_c| + e_c)
  std::unique_ptr<ld[]> relative_error;  // sum_c T_c e_c / (|X_c| + e_c)
  std::unique_ptr<ld[]> log_abs_log;     // for the pow rounding bound
  std::unique_ptr<ld[]> phase, log_mod;
  std::vector<char> dead;
};

// Frequencies whose bound on |product| + error is below e^{-700} are "dead": they are set
// to 0 and their whole bound (<= e^{-700} each) goes into the error. For T-fold powers
// this is most of the spectrum, and skipping their atan2/exp/sincos is a large saving.
// The later components can raise log_magnitude by at most T_c log(||x_c||_1 + e_c) <=
// T_c 1e-6: ||x_c||_1 <= 1 because the tilted masses are normalised by an upper bound on
// the MGF, and e_c <= 16 u 26 2^13 < 1e-6 for n <= 2^26.
constexpr ld kDeadLog = -700;

// One component's tilted array, folded modulo n, and its transform; e_f bounds the
// transform's error per frequency.
void TiltedTransform(const ComposeContext& ctx, const ComponentPmfs& c, int64_t n,
                     RealFft* fft, std::vector<std::complex<double>>* spec,
                     ld* e_f) {
  const double h = ctx.h;
  const ld lambda = ctx.lambda;
  const Pmf& pmf = ctx.pmf(c);
  const ld log_m = ctx.log_mgf[&c - ctx.comps.data()];  // LogMgf(pmf, h, lambda)
  const ld log2n = std::ceil(std::log2(static_cast<ld>(n)));
  std::vector<double> x(n, 0.0);
  const int64_t len = static_cast<int64_t>(pmf.mass.size());
  for (int64_t i = 0; i < len; ++i) {
    if (pmf.mass[i] <= 0) continue;
    const int64_t k = pmf.min_index + i;
    const ld v = std::exp(pmf.log_mass[i] + lambda * static_cast<ld>(k) * h - log_m);
    int64_t pos = k % n;
    if (pos < 0) pos += n;
    x[pos] += static_cast<double>(v);
  }
  ld norm2 = 0, norm1 = 0;
  for (double v : x) {
    norm2 += static_cast<ld>(v) * v;
    norm1 += std::fabs(v);
  }
  *e_f = 16 * kUnit * log2n * std::sqrt(static_cast<ld>(n)) * std::sqrt(norm2) +
         2 * kUnit * norm1;
  fft->Forward(x, spec);
}

// One frequency's terms of the power (log-modulus, phase and error terms), summed over the
// components.
struct FrequencySums {
  ld log_magnitude, relative_error, log_abs_log, phase, log_mod;
};

// Adds component c's terms at a frequency with transform z to f (first: sets them, the
// same value as 0 + term). Returns false where the frequency is dead (see kDeadLog; then
// only log_magnitude was updated).
// logs, where given, holds the count-free parts of the terms at this frequency (see
// TransformCache): read where present, computed and stored where not.
struct CachedLogs {
  double* log_a;
  double* log_m;
  double* arg;
};

bool AddFrequencyTerms(const ComponentPmfs& c, std::complex<double> z, ld e_f, ld slack,
                       bool first, FrequencySums* f, const CachedLogs* logs = nullptr) {
  const auto add = [first](ld* sum, ld term) { *sum = first ? term : *sum + term; };
  // |z| as sqrt(re^2 + im^2): 2 ulps, covered by the 6-ulp term of the pow bound.
  const double mod = std::sqrt(std::norm(z));
  const double a_mod = mod + static_cast<double>(e_f);
  const double log_a = logs != nullptr ? *logs->log_a : std::log(a_mod);
  add(&f->log_magnitude, c.count * log_a);
  if (f->log_magnitude + slack < kDeadLog) return false;
  double log_m, arg;
  if (logs != nullptr && !std::isnan(*logs->log_m)) {
    log_m = *logs->log_m;
    arg = *logs->arg;
  } else {
    log_m = std::log(std::max(mod, DBL_MIN));
    arg = std::arg(z);
    if (logs != nullptr) {
      *logs->log_m = log_m;
      *logs->arg = arg;
    }
  }
  add(&f->relative_error, c.count * static_cast<double>(e_f) / a_mod);
  add(&f->log_abs_log, c.count * (std::fabs(log_m) + 4));
  add(&f->log_mod, c.count * log_m);
  add(&f->phase, c.count * arg);
  return true;
}

// The sums over the components of the power's log-modulus, phase and error terms, per
// frequency (several components; one is streamed by PowerOfSpectrum without them).
Spectrum AccumulateSpectrum(const ComposeContext& ctx, int64_t n, RealFft* fft) {
  const int64_t nf = n / 2 + 1;
  Spectrum sp(nf);
  std::vector<std::complex<double>> spec;
  ld slack = 0;
  for (const ComponentPmfs& c : ctx.comps) slack += c.count * 1e-6_ld;
  for (const ComponentPmfs& c : ctx.comps) {
    slack -= c.count * 1e-6_ld;
    ld e_f;
    TiltedTransform(ctx, c, n, fft, &spec, &e_f);
    const bool first = &c == &ctx.comps.front();
    for (int64_t k = 0; k < nf; ++k) {
      if (sp.dead[k]) continue;
      FrequencySums f;  // the first component writes the sums without reading them
      if (!first) {
        f = {sp.log_magnitude[k], sp.relative_error[k], sp.log_abs_log[k], sp.phase[k],
             sp.log_mod[k]};
      }
      const bool alive = AddFrequencyTerms(c, spec[k], e_f, slack, first, &f);
      sp.log_magnitude[k] = f.log_magnitude;
      if (!alive) {
        sp.dead[k] = 1;
        continue;
      }
      sp.relative_error[k] = f.relative_error;
      sp.log_abs_log[k] = f.log_abs_log;
      sp.phase[k] = f.phase;
      sp.log_mod[k] = f.log_mod;
    }
  }
  return sp;
}

// The product of the transforms at one live frequency (the power, from its log-modulus
// and phase) and its error bound, added to the error and norm sums.
std::complex<double> PowerAt(const FrequencySums& f, ld weight, ld* err_sum, ld* y_norm2) {
  const double mag = std::exp(static_cast<double>(f.log_mod));
  const double ph = static_cast<double>(std::fmod(f.phase, 2 * static_cast<ld>(M_PI)));
  const double bound = std::exp(static_cast<double>(f.log_magnitude));
  const ld err = bound * f.relative_error + 6 * kUnit * f.log_abs_log * bound +
                 2 * kUnit * mag;
  *err_sum += weight * err;
  *y_norm2 += weight * mag * mag;
  return std::polar(mag, ph);
}

// The power of the spectrum at every frequency, its inverse transform rotated to the
// window, and the bound on every entry's error (see (4)). A single component is streamed:
// its terms at each frequency go straight into the product (the same values the sums
// would hold: x = 0 + x, slack 0), without the five long double sums per frequency
// (69 MB on a 1.7M-point window).
Composed PowerOfSpectrum(const ComposeContext& ctx, const Window& win, RealFft* fft) {
  const int64_t n = win.n;
  const int64_t nf = n / 2 + 1;
  const ld log2n = std::ceil(std::log2(static_cast<ld>(n)));
  // Allocated once the transforms exist (the tilted arrays are freed by then).
  std::vector<std::complex<double>> product;
  ld err_sum = 0, y_norm2 = 0;
  int64_t dead_count = 0;
  const auto weight_of = [n](int64_t k) -> ld { return (k == 0 || (2 * k == n)) ? 1 : 2; };
  if (ctx.comps.size() == 1) {
    const ComponentPmfs& c = ctx.comps.front();
    TransformCache local;
    TransformCache* cache =
        ctx.stage != nullptr && ctx.stage->transform != nullptr ? ctx.stage->transform : &local;
    const bool shared = cache != &local;
    if (!(cache->pmf == &ctx.pmf(c) && cache->h == ctx.h && cache->lambda == ctx.lambda &&
          cache->n == n)) {
      TiltedTransform(ctx, c, n, fft, &cache->spec, &cache->e_f);
      cache->pmf = &ctx.pmf(c);
      cache->h = ctx.h;
      cache->lambda = ctx.lambda;
      cache->n = n;
      cache->log_a.clear();
      if (shared) {
        const double e_f = static_cast<double>(cache->e_f);
        cache->log_a.resize(nf);
        for (int64_t k = 0; k < nf; ++k) {
          cache->log_a[k] = std::log(std::sqrt(std::norm(cache->spec[k])) + e_f);
        }
        cache->log_m.assign(nf, std::numeric_limits<double>::quiet_NaN());
        cache->arg.assign(nf, 0);
      }
    }
    const std::vector<std::complex<double>>& spec = cache->spec;
    const ld e_f = cache->e_f;
    const ld slack = c.count * 1e-6_ld - c.count * 1e-6_ld;  // as AccumulateSpectrum's
    product.assign(nf, std::complex<double>(0, 0));
    for (int64_t k = 0; k < nf; ++k) {
      FrequencySums f;
      CachedLogs logs{nullptr, nullptr, nullptr};
      if (shared) logs = {&cache->log_a[k], &cache->log_m[k], &cache->arg[k]};
      if (!AddFrequencyTerms(c, spec[k], e_f, slack, true, &f, shared ? &logs : nullptr)) {
        dead_count += static_cast<int64_t>(weight_of(k));
        continue;
      }
      product[k] = PowerAt(f, weight_of(k), &err_sum, &y_norm2);
    }
  } else {
    const Spectrum sp = AccumulateSpectrum(ctx, n, fft);
    product.assign(nf, std::complex<double>(0, 0));
    for (int64_t k = 0; k < nf; ++k) {
      if (sp.dead[k]) {
        dead_count += static_cast<int64_t>(weight_of(k));
        continue;
      }
      const FrequencySums f{sp.log_magnitude[k], sp.relative_error[k], sp.log_abs_log[k],
                            sp.phase[k], sp.log_mod[k]};
      product[k] = PowerAt(f, weight_of(k), &err_sum, &y_norm2);
    }
  }
  err_sum += static_cast<ld>(dead_count) * std::exp(kDeadLog);
  std::vector<double> y;
  fft->Inverse(product, &y);
  const ld y_norm = std::sqrt(y_norm2) / std::sqrt(static_cast<ld>(n));
  Composed out;
  out.h = ctx.h;
  out.window_start = win.start;
  out.n = n;
  // tilted[j] = y[(win.start + j) mod n]: y rotated in place (no second window in memory).
  int64_t start = win.start % n;
  if (start < 0) start += n;
  product = {};  // freed before the window's copies below
  std::rotate(y.begin(), y.begin() + start, y.end());
  out.tilted = std::move(y);
  out.lambda = ctx.lambda;
  out.log_scale = ctx.k_exact;
  out.entry_error = err_sum / static_cast<ld>(n) + 16 * kUnit * log2n * y_norm +
                    4 * kUnit * y_norm;
  out.tilted_outside = win.tau;
  // Untilted mass above the window: e^{K(lambda) - lambda B} * tilted mass above B.
  out.log_above_bound = ctx.k_exact - ctx.lambda * win.hi_edge + win.log_above;
  out.infinity_mass = -std::expm1(ctx.log_no_inf);
  SetSupport(ctx.comps, ctx.bound, &out);
  return out;
}

// The composition of an empty finite part (e.g. all mass at +inf): nothing to convolve.
Composed EmptyComposition(const ComposeContext& ctx) {
  Composed out;
  out.h = ctx.h;
  out.window_start = 0;
  out.n = 0;
  out.lambda = 0;
  out.log_scale = -std::numeric_limits<ld>::infinity();
  out.entry_error = 0;
  out.tilted_outside = 0;
  out.log_above_bound = -std::numeric_limits<ld>::infinity();
  out.infinity_mass = -std::expm1(ctx.log_no_inf);
  return out;
}

// The tilted mass a single-stage window may leave outside.
ld RequiredAliasing(const ComposeContext& ctx, double tolerance) {
  // Aliasing error far below the value (see the comment above Compose in the header).
  // delta / e^{K - lambda eps} is about p~(eps) / (lambda (lambda + 1)) (the tilted density
  // at eps times the integral of (1 - e^{-y}) e^{-lambda y}), while the aliasing allowance
  // (DeltaAt) is tau e^{K - lambda eps}: with p~ ~ 1/spread the relative error is about
  // tau lambda (lambda + 1) spread. The first factor is kept as it was for lambda <= 10 (it
  // meets the tolerance there with room to spare); heavily tilted laws (tiny epsilon, e.g.
  // q = 1e-4, sigma = 20, T = 1e4: lambda ~ 3300) need the extra lambda / 10.
  const ld lambda = ctx.lambda;
  return 1e-2_ld * tolerance / ((1 + lambda * ctx.spread) * std::max<ld>(1, lambda / 10));
}

}  // namespace

Result<int64_t> EstimatedWindowPoints(const std::vector<ComponentPmfs>& comps, Bound bound,
                                      double h, const Query& query, double tolerance,
                                      double h_target) {
  const ComposeContext ctx = MakeContext(comps, bound, h, query, nullptr);
  if (!std::isfinite(ctx.k_exact)) return int64_t{0};
  const SizeOnly sizing{h_target};
  const Result<Window> window = ChooseWindow(ctx, RequiredAliasing(ctx, tolerance),
                                             std::numeric_limits<ld>::infinity(), &sizing);
  if (!window.ok()) return window.error_value();
  return window->n;
}

Result<Composed> Compose(const std::vector<ComponentPmfs>& comps, Bound bound, double h,
                         const Query& query, double tolerance, RealFft* fft,
                         const StageOptions* stage) {
  const ComposeContext ctx = MakeContext(comps, bound, h, query, stage);
  if (!std::isfinite(ctx.k_exact)) return EmptyComposition(ctx);
  const ld required = ctx.bulk_only() ? stage->required : RequiredAliasing(ctx, tolerance);
  const ld log_above_allowed =
      ctx.bulk_only() ? stage->log_above_allowed : std::numeric_limits<ld>::infinity();
  const Result<Window> window = ChooseWindow(ctx, required, log_above_allowed);
  if (!window.ok()) return window.error_value();
  // First stage, upper PMF: the untilted mass below the window will be composed further,
  // so it is bounded (Chernoff on the untilted law, exact MGFs: lambda = 0 below) and
  // kept, at the window's first entry (see (6)).
  ld log_below_untilted = -std::numeric_limits<ld>::infinity();
  if (ctx.bulk_only() && bound == Bound::kUpper) {
    ld k0 = 0;
    for (const ComponentPmfs& c : comps) k0 += c.count * LogMgf(c.upper, h, 0);
    log_below_untilted =
        k0 + LogTiltedTail(ctx, 0, k0, window->lo_edge, -1, TailEstimate::kCertified);
  }
  Composed out = PowerOfSpectrum(ctx, *window, fft);
  out.log_below_bound = log_below_untilted;
  return out;
}

}  // namespace dpkit::accounting::pld_internal
