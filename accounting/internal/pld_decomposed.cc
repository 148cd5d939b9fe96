#include "dpkit/accounting/internal/pld_decomposed.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_component_pmfs.h"
#include "dpkit/accounting/internal/pld_delta_curve.h"
#include "dpkit/accounting/internal/pld_directions.h"
#include "dpkit/accounting/internal/pld_fft_composition.h"
#include "dpkit/accounting/internal/pld_loss_tails.h"
#include "dpkit/accounting/internal/pld_search.h"
#include "dpkit/accounting/internal/pld_staged_composition.h"

namespace dpkit::accounting::pld_internal {

namespace {

// dst[i] += w src[i], i < n. Written four entries at a time on non-aliasing pointers so
// that GCC's -O2 vectorizer (its "very cheap" cost model refuses loops that need an
// aliasing check or a scalar epilogue) turns the body into vector instructions; each entry
// is still one product and one sum, in the same order, so the result is unchanged.
void AddScaled(double w, const double* __restrict src, int64_t n, double* __restrict dst) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    dst[i] += w * src[i];
    dst[i + 1] += w * src[i + 1];
    dst[i + 2] += w * src[i + 2];
    dst[i + 3] += w * src[i + 3];
  }
  for (; i < n; ++i) dst[i] += w * src[i];
}

}  // namespace

Result<Pmf> ConvolveDirect(const Pmf& a, const Pmf& b, int64_t r, Bound bound) {
  const bool upper = bound == Bound::kUpper;
  Pmf out;
  out.infinity_mass = 0;
  if (upper) {
    ld a_all = a.infinity_mass, b_all = b.infinity_mass;
    ld a_out = a.infinity_mass, b_out = b.infinity_mass;  // +inf or below 1e-150
    for (const ld v : a.mass) {
      a_all += v;
      if (!(v > 1e-150_ld)) a_out += std::max<ld>(v, 0);
    }
    for (const ld v : b.mass) {
      b_all += v;
      if (!(v > 1e-150_ld)) b_out += std::max<ld>(v, 0);
    }
    out.infinity_mass = (a_out * b_all + b_out * a_all) * (1 + 8 * kLdUnit);
  }
  if (a.mass.empty() || b.mass.empty()) return out;
  const int64_t na = static_cast<int64_t>(a.mass.size());
  const int64_t nb = static_cast<int64_t>(b.mass.size());
  if (static_cast<ld>(na) * static_cast<ld>(nb) > 4e9_ld) {
    return Error{"direct convolution too large"};
  }
  out.min_index = a.min_index + r * b.min_index;
  // In double: masses below 1e-150 are dropped (so no product underflows), the rest
  // rounded to double (relative error u each), products and sums of non-negative terms
  // (relative error below (nb + 2) u in all), all covered by the allowance below.
  auto to_double = [](ld v) { return v > 1e-150_ld ? static_cast<double>(v) : 0.0; };
  std::vector<double> ad(na), sum(na + r * (nb - 1), 0.0);
  for (int64_t i = 0; i < na; ++i) ad[i] = to_double(a.mass[i]);
  for (int64_t j = 0; j < nb; ++j) {
    const double w = to_double(b.mass[j]);
    if (!(w > 0)) continue;
    AddScaled(w, ad.data(), na, sum.data() + r * j);
  }
  const ld keep = upper ? 1 + 4 * static_cast<ld>(nb + 4) * kUnit
                        : 1 - 4 * static_cast<ld>(nb + 4) * kUnit;
  out.mass.resize(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) out.mass[i] = static_cast<ld>(sum[i]) * keep;
  FillLogs(&out);
  return out;
}

// (7) Decomposed lower bound for one component used T times whose per-step loss sits in a
// few cells of the grid that the whole composition can afford (small q with small sigma:
// the bulk of log(1 - q + q e^ell) is about q wide). There every dominated discretisation
// on that grid loses a first-order amount per step ((3)), which compounds over T.
// Instead the per-step law is split at a loss tau (P(L > tau) <= 0.005 / T0) into its
// bulk F (L <= tau) and its tail G (L > tau), both sub-measures, discretised
// optimistically ((3)) on a fine grid h_f (about 64 cells across the central 80 % of the
// bulk) and on a tail grid H_G (>= tau / 32, where G is smooth). A block of T0 ~ sqrt(T)
// steps is
//    (F + G)^{*T0} = sum_k C(T0, k) F^{*(T0-k)} * G^{*k},
// with F^{*(T0-k)} composed on the fine grid by FFT and re-discretised optimistically
// onto the block grid H = M h_f (about 32 cells per standard deviation of a block's bulk;
// (6)), G^{*k} and the products with it by direct summation (ConvolveDirect, H_G a
// multiple of H); terms with k > K are dropped, K chosen so that their mass, at most
// (T0 p)^{K+1} e^{T0 p} / (K+1)!, is below a tenth of the tolerance times delta. Every
// piece is a sub-measure of a measure whose delta-curve is below the true one, and the
// argument of (3) (P-mass <= 1, composition with any convex non-increasing bounded
// delta-curve) carries through sums and compositions of such measures: composition is
// bilinear and the true law splits exactly as F + G. Dropping terms or mass only lowers
// delta. The T0-fold block law, spread over many H cells, is then composed T / T0 times
// (plus a block of the remaining steps) on H by FFT (4) with the whole composition's
// tilt. Used only where the ordinary lower bound leaves a gap wider than the refinement
// target (CertifiedBounds).
namespace {

// The loss quantile of one use: the smallest l with P(L > l) <= p (bisection; losses are
// within [-kMaxLoss, kMaxLoss]).
ld LossQuantile(const Mechanism& m, Direction dir, ld p) {
  auto above = [&](ld l) { return LossTailsAt(m, dir, l).sp; };  // P(L > l)
  return Bisect<ld>(
             -kMaxLoss, kMaxLoss, [&](ld mid) { return !(above(mid) > p); },
             [](ld lo, ld hi) { return !(hi - lo > 1e-12_ld * (1 + std::fabs(hi))); }, 200)
      .hi;
}

// The largest l with P(L <= l) <= p: where a grid built for the tail budget p starts
// (ChooseGridRange, pld_component_pmfs.cc; bisection as in LossQuantile).
ld LowerLossEnd(const Mechanism& m, Direction dir, ld p) {
  auto below = [&](ld l) { return LossTailsAt(m, dir, l).fp; };  // P(L <= l)
  return Bisect<ld>(
             -kMaxLoss, kMaxLoss, [&](ld mid) { return !(below(mid) <= p); },
             [](ld lo, ld hi) { return !(hi - lo > 1e-12_ld * (1 + std::fabs(hi))); }, 200)
      .lo;
}

// The grids of the decomposition: the fine grid h_f of the bulk (cells up to tau0), the
// block grid H = factor h_f, and the tail grid H_G = factor_g H (cells from tau_tail H_G
// up).
struct DecompositionGrids {
  ld tau0, h_f;
  int64_t factor, factor_g, tau_tail;
  double big_h, tail_h;
};

// Chooses the grids from the loss quantiles and the spread of a block's bulk (a first
// pass of the bulk on the fine grid); nullopt where the bulk cannot be resolved.
Result<std::optional<DecompositionGrids>> ChooseDecompositionGrids(const DecompositionInput& in,
                                                                   Bound bound, int64_t t0) {
  const Mechanism& m = in.m;
  const Direction dir = in.dir;
  const bool upper = bound == Bound::kUpper;
  const ld tau0 = LossQuantile(m, dir, 0.005_ld / static_cast<ld>(t0));
  const ld q10 = LossQuantile(m, dir, 0.9_ld), q90 = LossQuantile(m, dir, 0.1_ld);
  const ld lower_end = LossQuantile(m, dir, 1 - 1e-9_ld);
  ld h_f = std::min<ld>(in.h_pess, (q90 - q10) / 64);
  // At most kMaxDecomposedFineCells fine cells up to tau (a cost limit, see the header).
  h_f = std::max<ld>(h_f, (tau0 - lower_end) / static_cast<ld>(kMaxDecomposedFineCells));
  if (!(h_f > 0) || !std::isfinite(static_cast<double>(h_f))) {
    return std::optional<DecompositionGrids>();
  }
  // The bulk's grid also covers the losses below the 1e-9 quantile down to the tail budget:
  // where that is long (a thin lower tail, e.g. the add direction at q = 1e-6), the
  // decomposition is skipped before it is built (a cost limit, see the header).
  if (!((tau0 - LowerLossEnd(m, dir, in.tail)) / h_f <=
        static_cast<ld>(kMaxDecomposedTailCells))) {
    return std::optional<DecompositionGrids>();
  }
  const double hf = static_cast<double>(h_f);
  // First pass: the bulk on the fine grid up to tau, for its spread.
  Pmf unused, bulk;
  ContinuousPmfOptions options;
  options.hi_fixed = static_cast<int64_t>(std::ceil(tau0 / h_f));
  options.steps = static_cast<double>(in.total);
  DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, hf, in.tail, upper ? &bulk : &unused,
                                            upper ? &unused : &bulk, options));
  ld mass = 0, mean = 0, second = 0;
  for (size_t i = 0; i < bulk.mass.size(); ++i) {
    const ld l = static_cast<ld>(bulk.min_index + static_cast<int64_t>(i)) * h_f;
    mass += bulk.mass[i];
    mean += bulk.mass[i] * l;
    second += bulk.mass[i] * l * l;
  }
  if (!(mass > 0)) return std::optional<DecompositionGrids>();
  mean /= mass;
  const ld spread =
      std::sqrt(std::max<ld>(second / mass - mean * mean, 0) * static_cast<ld>(t0));
  // Block grid: about 32 cells per standard deviation of a block's bulk, no finer than h_f
  // and no coarser than the ordinary grid.
  // The final composition of T / T0 blocks on H adds about (T / T0) H^2 / 4 to the loss
  // variance, the ordinary grid T h^2 / 4: H = h sqrt(T0) / 2 keeps it below that.
  const ld h_block = std::min<ld>(spread / 32, in.h_pess * std::sqrt(static_cast<ld>(t0)) / 2);
  DecompositionGrids g;
  g.tau0 = tau0;
  g.h_f = h_f;
  g.factor = std::max<int64_t>(1, static_cast<int64_t>(std::floor(h_block / h_f)));
  g.big_h = static_cast<double>(g.factor) * hf;
  // The tail on its own grid H_G = factor_g H (its density varies on the scale of the loss
  // itself, >= tau): G and its powers are convolved directly there, and with a block's
  // bulk onto H (ConvolveDirect), no FFT.
  g.factor_g = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(std::max<ld>(g.big_h, tau0 / 32) / g.big_h)));
  g.tail_h = static_cast<double>(g.factor_g) * g.big_h;
  g.tau_tail = static_cast<int64_t>(std::ceil(tau0 / g.tail_h));
  // The tail's cells up to the loss above which its grid puts the mass at +inf (tail budget).
  const ld tail_cells = (LossQuantile(m, dir, in.tail) - tau0) / static_cast<ld>(g.tail_h);
  if (!(tail_cells <= static_cast<ld>(kMaxDecomposedTailCells))) {
    return std::optional<DecompositionGrids>();
  }
  return std::optional<DecompositionGrids>(g);
}

// Everything a block law needs: the bulk F on the fine grid, the powers of the tail G on
// its grid, the number K of tail terms kept, and the mass of the dropped terms (upper).
struct Decomposition {
  Bound bound;
  DecompositionGrids grids;
  Pmf bulk;
  std::vector<Pmf> tail_power;  // G^{*k}, k = 1..kmax
  int kmax = 0;
  ld dropped = 0;
  StageOptions stage;
  Query query;
  double tolerance;
};

// The bulk F (up to tau) and the tail G (from tau) as sub-measures, the number of tail
// terms kept and the mass of the dropped ones, and the powers of G.
Result<void> SplitBulkAndTail(const DecompositionInput& in, int64_t t0, ld hint,
                              Decomposition* d) {
  const bool upper = d->bound == Bound::kUpper;
  const DecompositionGrids& g = d->grids;
  const double hf = static_cast<double>(g.h_f);
  Pmf unused;
  ContinuousPmfOptions bulk_options;
  bulk_options.hi_fixed = g.tau_tail * g.factor_g * g.factor;
  bulk_options.steps = static_cast<double>(in.total);
  DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(in.m, in.dir, hf, in.tail,
                                            upper ? &d->bulk : &unused,
                                            upper ? &unused : &d->bulk, bulk_options));
  FillLogs(&d->bulk);
  Pmf tail_part;
  ContinuousPmfOptions tail_options;
  tail_options.lo_fixed = g.tau_tail;
  tail_options.steps = static_cast<double>(in.total);
  DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(in.m, in.dir, g.tail_h, in.tail,
                                            upper ? &tail_part : &unused,
                                            upper ? &unused : &tail_part, tail_options));
  if (!upper) tail_part.infinity_mass = 0;
  ld tail_mass = tail_part.infinity_mass, bulk_mass = d->bulk.infinity_mass;
  for (const ld v : tail_part.mass) tail_mass += v;
  for (const ld v : d->bulk.mass) bulk_mass += v;
  // Dropped terms: sum_{k > K} C(T0,k) p^k <= (T0 p)^{K+1}/(K+1)! e^{T0 p}, kept below a
  // tenth of the tolerance times delta (estimated by the target or the upper bound).
  const ld lambda_t = static_cast<ld>(t0) * std::max<ld>(tail_mass, 0);
  const ld delta_estimate =
      d->query.at_epsilon() ? std::max<ld>(hint, 1e-300_ld) : static_cast<ld>(d->query.value);
  const ld wanted = 0.1_ld * static_cast<ld>(in.tolerance) * delta_estimate;
  int kmax = 0;
  {
    ld term = lambda_t;  // (T0 p)^{K+1}/(K+1)!
    while (kmax < 12 && term * std::exp(lambda_t) > wanted) {
      ++kmax;
      term *= lambda_t / (kmax + 1);
    }
  }
  if (tail_part.mass.empty() || !(tail_mass > 0)) kmax = 0;
  // Upper: the dropped terms' mass goes to +inf; it is at most
  // sum_{k > K} C(T0,k) |F|^{T0-k} |G|^k <= (T0 |G|)^{K+1}/(K+1)! e^{T0 |G|} max(1, |F|)^{T0}.
  if (upper && tail_mass > 0) {
    ld term = 1;
    for (int k = 1; k <= kmax + 1; ++k) term *= lambda_t / k;
    d->dropped = term * std::exp(lambda_t) *
                 std::exp(static_cast<ld>(t0) * std::log(std::max<ld>(1, bulk_mass))) *
                 (1 + 64 * kLdUnit);
  }
  d->kmax = kmax;
  // Powers of the tail on its grid, pessimistic for the upper bound: G^{*k}'s mass at +inf
  // and its rounding go up (issue 21: with the lower bound's rule here, the upper bound
  // lost the +inf mass of k >= 2 tail draws, q 0.01, sigma 0.001, T 100, eps 1: delta
  // 0.61635 "certified" against an exact value >= 0.63397).
  d->tail_power.assign(kmax + 1, Pmf());
  if (kmax >= 1) d->tail_power[1] = tail_part;
  for (int k = 2; k <= kmax; ++k) {
    auto next = ConvolveDirect(d->tail_power[k - 1], tail_part, 1, d->bound);
    if (!next.ok()) return next.error_value();
    d->tail_power[k] = std::move(*next);
  }
  d->stage.required =
      std::max<ld>(1e-2_ld * in.tolerance /
                       (static_cast<ld>(in.total / t0 + 1) * 4194304.0_ld), 1e-300_ld);
  d->stage.log_above_allowed = std::log(1e-4_ld * in.tolerance) -
                               std::log(in.total / t0 + 2.0_ld) + std::log(delta_estimate);
  return OkResult();
}

// The law of one block of `steps` steps on the H grid:
// sum_{k <= K} C(steps, k) F^{*(steps-k)} * G^{*k}.
Result<Pmf> BlockLaw(const Decomposition& d, int64_t steps, RealFft* fft) {
  const bool upper = d.bound == Bound::kUpper;
  const int kmax = d.kmax;
  std::map<int64_t, ld> acc;
  ld infinity = upper ? d.dropped : 0;
  ld binom = 1;  // C(steps, k), rounded down (up) below
  // One bulk PMF object for every power, so its tilted transform is computed once
  // (TransformCache: the powers' windows usually have the same size).
  std::vector<ComponentPmfs> f(1);
  f[0].of(d.bound) = d.bulk;
  TransformCache transform;
  StageOptions stage = d.stage;
  stage.transform = &transform;
  for (int k = 0; k <= kmax && k <= steps; ++k) {
    if (k > 0) binom *= static_cast<ld>(steps - k + 1) / k;
    Pmf part;
    if (steps - k >= 1) {
      f[0].count = static_cast<double>(steps - k);
      auto composed = Compose(f, d.bound, static_cast<double>(d.grids.h_f), d.query,
                              d.tolerance, fft, &stage);
      if (!composed.ok()) return composed.error_value();
      part = Rediscretize(*composed, d.bound, d.grids.factor);
    } else {
      part.min_index = 0;
      part.mass = {1};
      FillLogs(&part);
    }
    if (k > 0) {
      auto product = ConvolveDirect(part, d.tail_power[k], d.grids.factor_g, d.bound);
      if (!product.ok()) return product.error_value();
      part = std::move(*product);
    }
    const ld w = binom * (upper ? 1 + 8 * static_cast<ld>(k + 1) * kLdUnit
                                : 1 - 8 * static_cast<ld>(k + 1) * kLdUnit);
    infinity += w * part.infinity_mass;
    for (size_t i = 0; i < part.mass.size(); ++i) {
      if (part.mass[i] > 0) acc[part.min_index + static_cast<int64_t>(i)] += w * part.mass[i];
    }
  }
  Pmf out;
  if (acc.empty()) return out;
  out.min_index = acc.begin()->first;
  out.mass.assign(acc.rbegin()->first - out.min_index + 1, 0);
  for (const auto& [index, v] : acc) {
    out.mass[index - out.min_index] = v * (upper ? 1 + 4 * kLdUnit : 1 - 4 * kLdUnit);
  }
  out.infinity_mass = upper ? infinity * (1 + 4 * kLdUnit) : 0;
  FillLogs(&out);
  return out;
}

// Whether the decomposition's tail grid can fit kMaxDecomposedTailCells, checked before any
// PMF is built. ChooseDecompositionGrids makes the block grid
// H = factor h_f <= h_block <= h_pess sqrt(T0) / 2 and the tail grid H_G = factor_g H <=
// max(H, tau / 32), so the tail needs at least (top - tau) / max(h_pess sqrt(T0) / 2, tau / 32)
// cells; where even that exceeds the limit, ChooseDecompositionGrids would refuse it.
bool TailGridMayFit(const Mechanism& m, Direction dir, int64_t total, double h_pess, ld tail) {
  const int64_t t0 = std::llround(std::sqrt(static_cast<double>(total)));
  const ld tau0 = LossQuantile(m, dir, 0.005_ld / static_cast<ld>(t0));
  const ld widest = std::max<ld>(static_cast<ld>(h_pess) * std::sqrt(static_cast<ld>(t0)) / 2,
                                 tau0 / 32);
  const ld cells = (LossQuantile(m, dir, tail) - tau0) / widest;
  return !(cells > static_cast<ld>(kMaxDecomposedTailCells));
}

// The final composition of the block laws on the block grid H; where that grid would
// exceed the grid limit, on 2H, 4H or 8H (the block laws moved there by CoarsenByFactor:
// certified on any grid, only tightness depends on it).
Result<Composed> ComposeBlocks(std::vector<ComponentPmfs> comps, Bound bound, double big_h,
                               const Query& query, double tolerance,
                               RealFft* fft, StageOptions* stage) {
  auto composed = Compose(comps, bound, big_h, query, tolerance, fft, stage);
  for (int64_t f = 2; f <= 8; f *= 2) {
    if (composed.ok() || composed.error_value().code != ErrorCode::kGridLimit) break;
    std::vector<ComponentPmfs> coarse = comps;
    for (ComponentPmfs& c : coarse) c.of(bound) = CoarsenByFactor(c.of(bound), f, bound);
    composed = Compose(coarse, bound, big_h * static_cast<double>(f), query, tolerance, fft,
                       stage);
  }
  return composed;
}

}  // namespace

Pmf CoarsenByFactor(const Pmf& pmf, int64_t f, Bound bound) {
  // f a power of two (the header): then f h is exact and the rounding is a true one.
  const bool upper = bound == Bound::kUpper;
  auto coarse_index = [&](int64_t i) {
    const int64_t q = i / f, r = i % f;
    if (r == 0) return q;
    return upper ? (i > 0 ? q + 1 : q) : (i < 0 ? q - 1 : q);
  };
  Pmf out;
  out.infinity_mass = pmf.infinity_mass;
  if (pmf.mass.empty()) return out;
  const int64_t first = coarse_index(pmf.min_index);
  const int64_t last = coarse_index(pmf.min_index + static_cast<int64_t>(pmf.mass.size()) - 1);
  out.min_index = first;
  out.mass.assign(last - first + 1, 0);
  for (size_t i = 0; i < pmf.mass.size(); ++i) {
    out.mass[coarse_index(pmf.min_index + static_cast<int64_t>(i)) - first] += pmf.mass[i];
  }
  const ld keep = upper ? 1 + 4 * static_cast<ld>(f + 4) * kLdUnit
                        : 1 - 4 * static_cast<ld>(f + 4) * kLdUnit;
  for (ld& v : out.mass) v *= keep;
  out.infinity_mass *= upper ? 1 + 4 * kLdUnit : 1;
  FillLogs(&out);
  return out;
}

Result<std::optional<ld>> DecomposedBound(const DecompositionInput& in, Bound bound,
                                          const Query& query, ld hint,
                                          RealFft* fft, ld* delta0_lower) {
  const Mechanism& m = in.m;
  const int64_t total = in.total;
  if (!(m.base == Base::kGaussian || m.base == Base::kLaplace) || total < 16) {
    return std::optional<ld>();
  }
  Decomposition d{bound, {}, {}, {}, 0, 0, {}, query, in.tolerance};
  d.stage.lambda = ChooseTilt({Coarsen(in.pessimistic, in.h_pess)},
                              {static_cast<double>(total)}, query);
  const int64_t t0 = std::llround(std::sqrt(static_cast<double>(total)));
  const int64_t blocks = total / t0, rest = total - blocks * t0;
  auto grids = ChooseDecompositionGrids(in, bound, t0);
  if (!grids.ok()) return grids.error_value();
  if (!grids->has_value()) return std::optional<ld>();
  d.grids = **grids;
  DPKIT_RETURN_IF_ERROR(SplitBulkAndTail(in, t0, hint, &d));
  d.stage.cover = WindowCover::kBulkOnly;
  std::vector<ComponentPmfs> final_comps;
  for (const auto& [steps, count] : {std::pair<int64_t, int64_t>{t0, blocks}, {rest, 1}}) {
    if (steps == 0 || count == 0) continue;
    auto law = BlockLaw(d, steps, fft);
    if (!law.ok()) return law.error_value();
    if (law->mass.empty()) return std::optional<ld>();
    ComponentPmfs c;
    c.of(bound) = std::move(*law);
    c.count = static_cast<double>(count);
    final_comps.push_back(std::move(c));
  }
  d.stage.cover = WindowCover::kTarget;
  auto composed = ComposeBlocks(final_comps, bound, d.grids.big_h, query, in.tolerance, fft,
                                &d.stage);
  if (!composed.ok()) return composed.error_value();
  // The query's answer first: its curve takes the window over and is freed before the
  // composition for delta(0) below.
  const double composed_h = composed->h;
  ld value;
  {
    const DeltaCurve curve = MakeCurve(std::move(*composed), bound);
    value = CurveAnswer(curve, query, hint);
  }
  // delta(0) from the same block laws, composed with its own tilt (the query's amplifies
  // the lower bound's allowances near loss 0: Table 1 row 6, sigma 0.5: 0.91347 against
  // 0.92178), for PldOptions::with_delta0: one more final composition, on the grid the
  // query's composition fitted (ComposeBlocks: H or a multiple), no retries of its own.
  if (delta0_lower != nullptr && bound == Bound::kLower) {
    const int64_t f = std::llround(composed_h / d.grids.big_h);
    if (f > 1) {
      for (ComponentPmfs& c : final_comps) c.of(bound) = CoarsenByFactor(c.of(bound), f, bound);
    }
    const Query zero{Query::Kind::kDeltaAtEpsilon, 0};
    StageOptions zero_stage = d.stage;
    zero_stage.lambda = ChooseTilt({Coarsen(in.pessimistic, in.h_pess)},
                                   {static_cast<double>(total)}, zero);
    auto at_zero = Compose(final_comps, bound, composed_h, zero, in.tolerance, fft,
                           &zero_stage);
    if (at_zero.ok()) {
      *delta0_lower =
          std::max(*delta0_lower, DeltaAt(MakeCurve(std::move(*at_zero), bound), 0));
    }
  }
  return std::optional<ld>(value);
}

Result<std::optional<DecomposedResults>> DecomposedBoundsForEvent(
    const Event& event, const GridOptions& options, ld tail_budget, Direction dir,
    const std::vector<Bound>& bounds, const Query& query, ld hint, bool with_delta0) {
  auto prepared = Prepare(event, options, tail_budget);
  if (!prepared.ok()) return prepared.error_value();
  if (prepared->flat.size() != 1) return std::optional<DecomposedResults>();
  const Mechanism m = prepared->flat[0].first;
  const double count = prepared->flat[0].second;
  if (!(count >= 16 && count <= 1e12 && count == std::floor(count))) {
    return std::optional<DecomposedResults>();
  }
  if (!(m.base == Base::kGaussian || m.base == Base::kLaplace)) {
    return std::optional<DecomposedResults>();
  }
  if (!TailGridMayFit(m, dir, static_cast<int64_t>(count), prepared->h, prepared->tail)) {
    return std::optional<DecomposedResults>();
  }
  auto comps = BuildDirection(&*prepared, dir);
  if (!comps.ok()) return comps.error_value();
  RealFft fft;
  DecomposedResults out;
  const DecompositionInput in{m,           dir,       static_cast<int64_t>(count),
                              (**comps)[0].upper,     prepared->h,
                              options.epsilon_tolerance, prepared->tail};
  for (const Bound bound : {Bound::kLower, Bound::kUpper}) {
    if (std::find(bounds.begin(), bounds.end(), bound) == bounds.end()) continue;
    auto& slot = bound == Bound::kUpper ? out.upper : out.lower;
    slot = DecomposedBound(in, bound, query, hint, &fft,
                           with_delta0 ? &out.delta0_lower : nullptr);
    // Both bounds use the same grids and their block laws the same support, so where the
    // final composition of one did not fit the grid limit even on 8H (ComposeBlocks), the
    // other would not either: it is not tried (before ComposeBlocks, q 1e-6, sigma 0.3,
    // T 1e7, delta 1e-10 spent 8 s on each bound for a refused 4.22M-point grid).
    if (!slot.ok() && slot.error_value().code == ErrorCode::kGridLimit) {
      (bound == Bound::kUpper ? out.lower : out.upper) = slot.error_value();
      break;
    }
  }
  return std::optional<DecomposedResults>(std::move(out));
}

}  // namespace dpkit::accounting::pld_internal
