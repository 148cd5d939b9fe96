#include "dpkit/accounting/internal/pld_sampled_composition.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_component_pmfs.h"
#include "dpkit/accounting/internal/pld_discrete_gaussian.h"
#include "dpkit/accounting/internal/pld_loss_tails.h"

namespace dpkit::accounting::pld_internal {
namespace {

// ---------------------------------------------------------------------------------
// Poisson sampling of a composition (e.g. the sparse DP-SGD step PoissonSampled(q,
// Composed{BoundedRange, Gaussian})).
//
// Let (B, A) be the inner composition's outputs with and without the record, ell =
// log(dB/dA) its loss (the inner remove direction, law under B) and m = -ell (the inner
// add direction, law under A). Poisson sampling gives the pairs ((1-q) A + q B, A)
// (remove) and (A, (1-q) A + q B) (add), with losses L = log(1 - q + q e^ell) and
// -log(1 - q + q e^{-m}) (Zhu, Dong, Wang 2022, Sec. 5; Balle, Barthe, Gaboardi 2018).
// Certification, through the delta-curves d(x) = E_P[(1 - x e^{-L})_+] + P(+inf), x = e^eps:
//  * remove: the outer P-law is (q + (1-q) e^{-ell}) dmu(ell) at L(ell), plus the inner
//    Q-only mass Q(-inf) times (1-q) at log(1-q), plus q mu(+inf) at +inf. Since
//    (q + (1-q) e^{-ell}) e^{-L} = e^{-ell}, for x >= 1-q this gives d_out(x) = q d_mu(x'),
//    x' = (x - 1 + q)/q, and for x < 1-q (all losses above log x) d_out(x) = (1-q-x) Q_tot
//    + q P_tot with the totals of the inner law (1 and 1 for a genuine pair).
//  * add: with nu the inner add law, d_out(x) = (1 - (1-q) x) d_nu(q x / (1 - (1-q) x))
//    for (1-q) x < 1, else 0 (the atom nu(+inf), where B = 0, lands at -log(1-q)).
// Both are monotone in the inner curve, and a composition's curve is monotone in each
// component's (d_{a*b}(x) = int d_a(x e^{-s}) db(s)), which is what (1) uses.
// Upper: mu (nu) is the direct convolution (long double, no window, no aliasing) of the
// inner components' pessimistic PMFs of that direction; their masses are >= those of the
// composition G of the connect-the-dots pairs (a genuine pair that dominates, (1), (2)),
// so d_mu >= d_G >= the truth. For x < 1-q (remove) the totals must be >= 1: the P-total
// is (P_mu + mu(+inf)) >= 1, and for the Q-total the Q-only mass of G is bounded by
// sum_c count_c u_c, u_c = the Q-mass below component c's lowest grid point (its P-mass is
// moved up there, which loses part of its Q-mass) plus the Q-mass above its top (its
// P-mass goes to +inf) plus the base's own Q-only mass (delta for ApproxDp); that bound
// is put at log(1-q). +inf masses: union bound sum_c count_c P_c(+inf).
// Lower: the convolution of the inner optimistic PMFs (each with d_lambda <= the truth,
// which the convolution keeps), trimmed at its lowest losses to P- and Q-totals <= 1
// (remove: then (1-q-x) Q_tot + q P_tot <= 1 - x, the true outer curve there), its +inf
// mass 1 - prod_c (1 - lambda_c(+inf))^count (the convolution's, rounded down); the atom at
// log(1-q) is dropped, every atom's loss is lowered by its rounding bound, and the atoms
// are put on the grid by the tangent method of (3) where they are dense
// (BuildDenseAtomsLowerPmf) and rounded down to the grid where isolated: all of which only
// lowers the curve (moving P-mass down: the coupling L' <= L).
// The atoms of the pessimistic PMF are placed on the grid by connect-the-dots after
// raising their loss by its rounding bound. The work (multiply-adds) of the convolution
// is limited to kMaxConvolutionWork; beyond it the error is the grid-limit one, so that a
// coarser grid is tried (the work scales as 1/h^2).
constexpr double kMaxConvolutionWork = 4e8;


// Q-only (remove only) and +inf masses of the composed connect-the-dots pair (union
// bounds, see above).
struct UnionBounds {
  ld q_only, p_inf;
};
UnionBounds InnerUnionBounds(const InnerComposition& in, bool remove, double h) {
  const std::vector<ComponentPmfs>& comps = in.pmfs;
  ld q_only = 0, p_inf = 0;
  for (size_t c = 0; c < comps.size(); ++c) {
    const Mechanism& mc = in.flat[c].first;
    const ld count = static_cast<ld>(in.flat[c].second);
    ld u = 0;
    if (!remove) {
      u = 0;
    } else if (mc.base == Base::kRandomizedResponse) {
      u = mc.rr_delta;
    } else if (mc.base != Base::kBoundedRange) {
      std::unique_ptr<DiscreteGaussianTails> dg;
      if (mc.base == Base::kDiscreteGaussian) dg.reset(new DiscreteGaussianTails(mc.parameter));
      const Pmf& pmf = comps[c].upper;
      const int64_t n = static_cast<int64_t>(pmf.mass.size()) - 1;
      const LossTails bottom =
          LossTailsAt(mc, Direction::kRemove, static_cast<ld>(pmf.min_index) * h, dg.get());
      const LossTails top =
          LossTailsAt(mc, Direction::kRemove, static_cast<ld>(pmf.min_index + n) * h, dg.get());
      u = bottom.fq + bottom.q_err + top.sq + top.q_err;
    }
    q_only += count * u * (1 + kCdfUlps * kLdUnit);
    p_inf += count * comps[c].upper.infinity_mass;
  }
  q_only = std::min<ld>(1, q_only * (1 + 1e-10_ld) + kLdMin);
  p_inf = std::min<ld>(1, p_inf * (1 + 1e-10_ld));
  return {q_only, p_inf};
}

// The factors of the direct convolution: one PMF per use, largest supports first (then the
// work is about the larger support times the number of nonzero masses of the others).
using ConvolutionSteps = std::vector<std::pair<const Pmf*, int64_t>>;
struct ConvolutionPlan {
  ConvolutionSteps upper, lower;
};
Result<ConvolutionPlan> PlanConvolution(const InnerComposition& in, double h) {
  const std::vector<ComponentPmfs>& comps = in.pmfs;
  ConvolutionPlan plan;
  double work = 0, acc_size = 1;
  for (size_t c = 0; c < comps.size(); ++c) {
    const double count = in.flat[c].second;
    if (count > 1e6) {
      return Error{"the pld accountant cannot Poisson-sample a composition of more than 1e6 "
                   "events (use --accountant=rdp)"};
    }
    for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) {
      plan.upper.push_back({&comps[c].upper, 0});
      plan.lower.push_back({&comps[c].lower, 0});
    }
  }
  auto by_size = [](const std::pair<const Pmf*, int64_t>& a,
                    const std::pair<const Pmf*, int64_t>& b) {
    return a.first->mass.size() > b.first->mass.size();
  };
  std::stable_sort(plan.upper.begin(), plan.upper.end(), by_size);
  std::stable_sort(plan.lower.begin(), plan.lower.end(), by_size);
  for (const auto& step : plan.upper) {
    double nonzero = 0;
    for (ld v : step.first->mass) nonzero += v != 0;
    work += nonzero * acc_size;
    acc_size += static_cast<double>(step.first->mass.size()) - 1;
  }
  if (work > kMaxConvolutionWork) {
    // The work scales as 1/h^2: report it as a grid that is too fine.
    const double need = static_cast<double>(kMaxGridPoints) * std::sqrt(work / kMaxConvolutionWork);
    return GridLimitError(static_cast<int64_t>(need), kMaxGridPoints, h);
  }
  return plan;
}

// The direct convolution of the steps: the masses on the grid from *min_index, and the
// relative rounding bound.
std::vector<ld> Convolve(const ConvolutionSteps& steps, int64_t* min_index, ld* rounding) {
  std::vector<ld> acc = {1};
  *min_index = 0;
  *rounding = 0;
  for (const auto& step : steps) {
    const Pmf& pmf = *step.first;
    std::vector<ld> next(acc.size() + pmf.mass.size() - 1, 0);
    int64_t nonzero = 0;
    for (size_t j = 0; j < pmf.mass.size(); ++j) {
      const ld v = pmf.mass[j];
      if (v <= 0) continue;
      ++nonzero;
      ld* out = next.data() + j;
      for (size_t i = 0; i < acc.size(); ++i) out[i] += acc[i] * v;
    }
    // Each entry is a sum of at most `nonzero` nonnegative products.
    *rounding += static_cast<ld>(nonzero + 1) * kLdUnit;
    *min_index += pmf.min_index;
    acc.swap(next);
  }
  return acc;
}

// The subsampled loss of an inner loss (ell for remove, m for add), the factor of its
// P-mass (see above), and the rounding bounds of both.
struct OuterMap {
  ld q;
  bool remove;
  ld Loss(ld inner_loss) const {
    return remove ? std::log1p(q * std::expm1(inner_loss))
                  : -std::log1p(q * std::expm1(-inner_loss));
  }
  // Rounding bound of Loss: the grid value (u |ell|, and |dL/d ell| <= 1), expm1 and the
  // product (3 ulps of y = q expm1, i.e. 3 u |y|/(1+y) <= 3 u max(1, q/(1-q)) in L),
  // log1p (u |L|); doubled.
  ld LossError(ld inner_loss, ld loss) const {
    return 8 * kLdUnit * (std::fabs(loss) + std::fabs(inner_loss) + 1 + q / (1 - q));
  }
  // P-mass factor and the relative bound on its rounding (exp of -ell: (|ell| + 2) ulps).
  ld MassFactor(ld ell) const { return remove ? q + (1 - q) * std::exp(-ell) : 1.0_ld; }
  ld FactorError(ld ell) const { return (2 * std::fabs(ell) + 16) * kLdUnit; }
};

// Pessimistic: convolve, transform, place by connect-the-dots.
Result<void> PessimisticSampledPmf(const ConvolutionSteps& steps, const OuterMap& map,
                                   const UnionBounds& bounds, double h, Pmf* upper) {
  const bool remove = map.remove;
  const ld q = map.q;
  const ld x_h = -std::expm1(-static_cast<ld>(h));
  int64_t min_index;
  ld rounding;
  std::vector<ld> g = Convolve(steps, &min_index, &rounding);
  std::vector<std::pair<ld, ld>> atoms;  // (loss, P-mass), before placement
  ld to_infinity = remove ? q * bounds.p_inf : 0;
  for (size_t j = 0; j < g.size(); ++j) {
    if (g[j] <= 0) continue;
    const ld ell = static_cast<ld>(min_index + static_cast<int64_t>(j)) * h;
    const ld mass =
        g[j] * (1 + 1.01_ld * rounding) * map.MassFactor(ell) * (1 + map.FactorError(ell));
    const ld loss = map.Loss(ell);
    atoms.push_back({loss + map.LossError(ell, loss), mass});
  }
  // Remove: the inner Q-only mass (ell = -inf) at log(1-q). Add: the inner +inf mass
  // (m = +inf, where B = 0) at -log(1-q).
  const ld edge = remove ? std::log1p(-q) : -std::log1p(-q);
  atoms.push_back({edge + 8 * kLdUnit * std::fabs(edge),
                   (remove ? (1 - q) * bounds.q_only : bounds.p_inf) * (1 + 8 * kLdUnit)});
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  const ld cap = kMaxLoss;
  for (const auto& [loss, mass] : atoms) {
    if (!(mass > 0) || loss > cap) continue;
    const int64_t a = static_cast<int64_t>(std::floor(std::max(loss, -cap) / h));
    lo = std::min(lo, a);
    hi = std::max(hi, a + 1);
  }
  upper->infinity_mass = 0;
  if (lo > hi) {
    lo = 0;
    hi = 1;
  }
  if (hi - lo + 1 > kMaxGridPoints) return GridLimitError(hi - lo + 1, kMaxGridPoints, h);
  upper->min_index = lo;
  upper->mass.assign(hi - lo + 1, 0);
  for (const auto& [loss, mass] : atoms) {
    if (!(mass > 0)) continue;
    if (loss > cap) {  // beyond the loss range: +inf (pessimistic)
      to_infinity += mass;
      continue;
    }
    const ld l = std::max(loss, -cap);  // below the range: moved up
    int64_t a = static_cast<int64_t>(std::floor(l / h));
    const ld frac = l - static_cast<ld>(a) * h;
    // Weight to the upper end: (e^{-a} - e^{-l}) / (e^{-a} - e^{-b}) (as in
    // BuildRandomizedResponsePmfs).
    const ld wb = frac <= 0 ? 0 : std::min<ld>(1, -std::expm1(-frac) / x_h);
    upper->mass[a - lo] += mass * (1 - wb) * (1 + 8 * kLdUnit);
    upper->mass[a + 1 - lo] += mass * wb * (1 + 8 * kLdUnit) + 4 * kLdMin;
  }
  upper->infinity_mass = std::min<ld>(1, to_infinity * (1 + 8 * kLdUnit));
  return OkResult();
}

// Optimistic, remove direction: drops mass from the lowest losses until the P- and
// Q-totals of the convolution (g on the grid from min_index, plus inf_lower at +inf) are
// <= 1 (see above).
void TrimToUnitTotals(ld inf_lower, int64_t min_index, double h, std::vector<ld>* g_out) {
  std::vector<ld>& g = *g_out;
  ld p_mass = inf_lower;
  for (ld v : g) p_mass += v;
  p_mass *= 1 + 1e-12_ld;
  for (size_t j = 0; j < g.size() && p_mass > 1; ++j) {
    const ld cut = std::min(g[j], (p_mass - 1) * (1 + 1e-12_ld));
    g[j] -= cut;
    p_mass -= cut;
  }
  ld q_mass = 0;
  for (size_t j = 0; j < g.size(); ++j) {
    if (g[j] > 0) {
      q_mass += std::exp(std::log(g[j]) -
                         static_cast<ld>(min_index + static_cast<int64_t>(j)) * h);
    }
  }
  q_mass *= 1 + 1e-12_ld;
  // Remove the excess Q-mass from the lowest losses (the P-mass removed there is the
  // excess times e^{ell}, small where ell < 0).
  for (size_t j = 0; j < g.size() && q_mass > 1; ++j) {
    if (g[j] <= 0) continue;
    const ld ell = static_cast<ld>(min_index + static_cast<int64_t>(j)) * h;
    const ld here = std::exp(std::log(g[j]) - ell);
    const ld excess = (q_mass - 1) * (1 + 1e-12_ld);
    if (here <= excess) {
      q_mass -= here;
      g[j] = 0;
    } else {
      g[j] = std::max<ld>(0, g[j] - std::exp(std::log(excess) + ell) * (1 + 1e-12_ld));
      q_mass = 1;
    }
  }
}

// Optimistic: convolve, (remove) drop low mass until the P- and Q-totals are <= 1,
// transform, round down.
Result<void> OptimisticSampledPmf(const Mechanism& m, Direction dir, double h, ld tail,
                                  const InnerComposition& in, const ConvolutionSteps& steps,
                                  const OuterMap& map, Pmf* lower) {
  const bool remove = map.remove;
  const ld q = map.q;
  int64_t min_index;
  ld rounding;
  std::vector<ld> g = Convolve(steps, &min_index, &rounding);
  for (ld& v : g) v = std::max<ld>(0, v * (1 - 1.01_ld * rounding) * (1 - 8 * kLdUnit));
  // The composed +inf mass: some component at +inf, 1 - prod_c (1 - P_c(+inf))^count.
  ld log_finite = 0;
  for (size_t c = 0; c < in.pmfs.size(); ++c) {
    log_finite += static_cast<ld>(in.flat[c].second) *
                  std::log1p(-std::min<ld>(in.pmfs[c].lower.infinity_mass, 1));
  }
  const ld inf_lower = std::max<ld>(0, -std::expm1(log_finite) * (1 - 1e-10_ld));
  if (remove) TrimToUnitTotals(inf_lower, min_index, h, &g);
  // (loss, P-mass) of the finite atoms; add: the inner +inf mass lands at -log(1-q).
  std::vector<std::pair<ld, ld>> atoms;
  for (size_t j = 0; j < g.size(); ++j) {
    if (g[j] <= 0) continue;
    const ld ell = static_cast<ld>(min_index + static_cast<int64_t>(j)) * h;
    const ld loss = map.Loss(ell);
    atoms.push_back(
        {loss - map.LossError(ell, loss), g[j] * map.MassFactor(ell) * (1 - map.FactorError(ell))});
  }
  if (!remove && inf_lower > 0) {
    const ld edge = -std::log1p(-q);
    atoms.push_back({edge - 8 * kLdUnit * std::fabs(edge), inf_lower * (1 - 8 * kLdUnit)});
  }
  return PlaceLowerAtoms(std::move(atoms), m, dir, h, tail,
                         remove ? q * inf_lower * (1 - 8 * kLdUnit) : 0, lower);
}

}  // namespace

Result<void> BuildSampledCompositionPmfs(const Mechanism& m, Direction dir, double h, ld tail,
                                         const InnerComposition& inner, Pmf* upper,
                                         Pmf* lower) {
  const bool remove = dir == Direction::kRemove;
  const UnionBounds bounds = InnerUnionBounds(inner, remove, h);
  const Result<ConvolutionPlan> plan = PlanConvolution(inner, h);
  if (!plan.ok()) return plan.error_value();
  const OuterMap map{static_cast<ld>(m.sampling_rate), remove};
  DPKIT_RETURN_IF_ERROR(PessimisticSampledPmf(plan->upper, map, bounds, h, upper));
  return OptimisticSampledPmf(m, dir, h, tail, inner, plan->lower, map, lower);
}

}  // namespace dpkit::accounting::pld_internal
