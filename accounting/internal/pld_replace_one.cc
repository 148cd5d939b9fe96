#include "dpkit/accounting/internal/pld_replace_one.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace dpkit::accounting::pld_internal {
namespace {

// ---------------------------------------------------------------------------------
// Sampling without replacement under replace-one adjacency (the fixed-size DP-SGD step
// SampledWithoutReplacement(n, m, Gaussian(z)): n and the batch size m fixed, neighbouring
// datasets of the same size differ in one record).
//
// Notation: the base mechanism run on an m-subset, for two subsets that differ in one
// record, gives a pair whose tradeoff function is at least f = T(A, B), where (B, A) is
// the base's pair with and without the shift (Gaussian: A = N(0, z^2), B = N(1, z^2)).
// f is SYMMETRIC (f = f^{-1}) for the bases supported here (Gaussian, Laplace, discrete
// Gaussian at integer sensitivity D): a reflection of the output space (y -> 1 - y,
// x -> D - x) swaps A and B. x = e^eps; H_x(P||Q) = sup_S P(S) - x Q(S) is the hockey
// stick; for a tradeoff function g, delta_g(x) = sup_a 1 - g(a) - x a = 1 + g*(-x)
// (DRS 2019, Prop. 2.12), which for g = T(P, Q) is H_x(Q||P).
//
// (R1) One step. Dong, Roth, Su 2019 ("Gaussian differential privacy", arXiv:1905.02383;
//      JRSS-B 2022), Thm. 4.2: if M is f-DP under replace-one, M run on a uniformly random
//      m-subset of the n records is C_p(f)-DP, p = m/n, C_p(f) = min{f_p, f_p^{-1}}**,
//      f_p = p f + (1 - p) Id. The biconjugate does not change the conjugate, and
//      (min{a, b})* = max{a*, b*}, so for EVERY real eps
//        delta_{C_p(f)}(x) = max(delta_{f_p}(x), delta_{f_p^{-1}}(x)).
//      f_p = T(A, (1-p) A + p B) (the Neyman-Pearson test of A vs B also minimises the
//      mixture's type II error), so delta_{f_p} = H_x((1-p) A + p B || A) =: R(x), the
//      REMOVE direction of PoissonSampled(p, base) in dpkit's terms, and delta_{f_p^{-1}}
//      = H_x(A || (1-p) A + p B) =: D_add(x) = sup_a 1 - a - x f_p(a), the add direction.
//      Lemma: R(x) >= D_add(x) for x >= 1. With h0(a) = 1 - a - f(a): 1 - a - f_p(a) =
//      p h0(a), so 1 - f_p(a) - x a = p h0(a) - (x-1) a and 1 - a - x f_p(a) = p h0(a) -
//      (x-1) f_p(a). For any a put a' = f(a): f(f(a)) <= a (f(f(a)) = f^{-1}(f(a)) =
//      inf{t : f(t) <= f(a)}), so h0(a') >= h0(a), and f(a) <= 1 - a gives f(a) <= f_p(a):
//        R(x) >= p h0(a') - (x-1) f(a) >= p h0(a) - (x-1) f_p(a) = 1 - a - x f_p(a),
//      and the sup over a gives the lemma. Hence delta_{C_p(f)}(x) = R(x) for x >= 1, and,
//      C_p(f) being symmetric (a pair (P, Q) with T(P, Q) = C_p(f) has T(Q, P) = C_p(f)^{-1}
//      = C_p(f)), for 0 < x < 1 by complements (H_x(P||Q) = 1 - x + x H_{1/x}(Q||P) for
//      probability measures):
//        delta_{C_p(f)}(x) = 1 - x + x R(1/x).                                     (*)
//      (This equals D_add(x): the max above agrees with the symmetry.)
// (R2) The PMF. For a non-negative measure w on the grid points l_k = k h and +inf, let
//      delta_w(x) = sum_k w_k (1 - x e^{-l_k})_+ + w(inf). Given a remove-direction PMF r,
//      build w with w_k = r_k (k >= 1), w(inf) = r(inf), w_{-k} = e^{-l_k} r_k (k >= 1; the
//      symmetry w(-l) = e^{-l} w(l) of a symmetric pair's PLD) and an atom w_0 >= 0. With
//      S = w_0 + sum_{k>=1} r_k (1 + e^{-l_k}) + r(inf), the total mass of w:
//        delta_w(x) = delta_r+(x)                     (x >= 1; r+ = r on (0, inf]),
//        delta_w(x) = (1 - x) S + x delta_r+(1/x)     (0 < x < 1),
//      the second per atom pair: with a = e^{-l}, (1 - x a) + (a - x)_+ = (1 - x)(1 + a) +
//      (x - a)_+ since (t)_+ - (-t)_+ = t. Only atoms at l > log x >= 0 enter delta_r(x),
//      x >= 1, so delta_r+ = delta_r there. Comparing with R and (*):
//       * upper: if delta_r >= R on [1, inf) (r a dominating remove PMF, (2) of
//         pld_cells.cc) and S >= 1, then delta_w >= delta_{C_p(f)} at every eps. w_0 =
//         max(0, 1 - s) with s a LOWER bound of the exact sum of the stored r_k (1 + e^{-l_k})
//         and r(inf), rounded up; w_{-k} rounded UP (an extra non-negative atom only raises
//         the curve). If s > 1 (the dominating r carries a little extra mass), w_0 = 0 and
//         S > 1: still S >= 1.
//       * lower: if delta_r <= R on [1, inf) (r dominated, (3) of pld_cells.cc) and S <= 1,
//         then delta_w <= delta_{C_p(f)} everywhere. w_0 = max(0, 1 - s), s an UPPER bound of
//         the sum, rounded down, w_{-k} rounded DOWN. Where s > 1 an atom cannot be made
//         negative: mass is removed from r at its lowest positive losses (r shrinks, so
//         delta_r can only fall) until s <= 1, then w_0 = 0.
// (R3) Composition. A measure's curve at eps <= 0 involves its whole mass (delta_w(x) ->
//      S as x -> 0), and (1) of pld_common.h composes dominance at every eps: delta of a
//      convolution is one factor's curve averaged over the other's shifted atoms,
//      delta_{u*v}(x) = sum_j v_j delta_u(x e^{-l_j}) + v(inf) delta_u(0+), which needs
//      only non-negative measures, not total mass 1. Each step of the run (adaptively
//      chosen, on neighbouring datasets of the same size) is C_p(f)-DP, so the run is
//      C_p(f)^{(x)T}-DP (DRS 2019, Thm. 3.2), whose curve is that of the T-fold
//      composition of a pair with tradeoff function C_p(f); the composed upper w bounds it
//      from above, the composed lower w from below (the latter is a lower bound on the
//      ANALYSIS, which may be loose: see (R4)).
// (R4) Lower bound on the mechanism. C_p(f) composed is an upper bound; no datasets are
//      claimed to attain it. The lower bound is the exact value of an explicit pair: a sum
//      query with n - 1 records of value v, record i of value v + 1 (dataset D) or v
//      (dataset D'; sensitivity 1 under replace-one). (Koskela, Jalko, Honkela 2020's
//      substitute pair, the other records at the midpoint and record i at +-1/2, gives
//      ((1-p) A + p N(1/2), (1-p) A + p N(-1/2)), a smaller value: over all neighbouring
//      4-record datasets, pld_without_replacement_test finds the pair here the worst.) Given the subset, if i is not in it both outputs are the base at sum
//      m v; if it is, D gives the base at m v + 1 and D' at m v. So M(D) = (1-p) A + p B
//      and M(D') = A: the remove pair of PoissonSampled(p, base) (and (D', D) its add
//      pair), independently at each step (each step draws a fresh subset), i.e. exactly
//      the T-fold composition dpkit's Poisson accountant bounds, in both directions, on
//      the same pair of datasets for every component of a composition (unsampled bases on
//      the same sum; randomized response on record i's value for the pure/approximate DP
//      classes). So the certified lower bound of the event with each without-replacement
//      node replaced by PoissonSampled(p, base) (RealizedPairEvent) is a certified lower
//      bound on the mechanism's exact delta(eps) and eps(delta). p is rounded down there
//      (f_p, hence the curve, is monotone in p: f_p = p f + (1-p) Id with f <= Id) and up
//      in the component (WithoutReplacementRate).
// A Poisson-sampled event (add/remove adjacency) in the same composition is refused
// (Prepare): the two adjacencies do not compose into one guarantee.
// ---------------------------------------------------------------------------------

// Relative error bound of e^{-l} (l >= 0) computed as std::exp: (|l| + 4) ulps.
ld ExpError(ld l) { return (std::fabs(l) + 4) * kLdUnit; }

}  // namespace

double WithoutReplacementRate(int64_t population, int64_t sample_size, Bound bound) {
  if (sample_size >= population) return 1;
  const double p = static_cast<double>(sample_size) / static_cast<double>(population);
  if (bound == Bound::kUpper) return std::min(1.0, p * (1 + 8 * DBL_EPSILON));
  return p * (1 - 8 * DBL_EPSILON);
}

Pmf SymmetrizeRemovePmf(const Pmf& remove, double h, Bound bound) {
  const bool upper = bound == Bound::kUpper;
  const int64_t top = remove.min_index + static_cast<int64_t>(remove.mass.size()) - 1;
  const int64_t k_max = std::max<int64_t>(top, 0);
  // The positive atoms r_k, k = 1..k_max (0 below the PMF's range).
  std::vector<ld> r(k_max + 1, 0);
  for (int64_t k = std::max<int64_t>(1, remove.min_index); k <= top; ++k) {
    r[k] = std::max<ld>(remove.mass[k - remove.min_index], 0);
  }
  Pmf out;
  out.min_index = -k_max;
  out.mass.assign(2 * k_max + 1, 0);
  out.infinity_mass = remove.infinity_mass;
  // s = sum_k r_k (1 + e^{-l_k}) + r(inf), each term rounded to the side that keeps the
  // bound (R2); the sum of N non-negative terms is within N ulps (relative).
  const auto total = [&](ld* sum) {
    ld s = remove.infinity_mass;
    for (int64_t k = 1; k <= k_max; ++k) {
      if (r[k] <= 0) continue;
      const ld l = static_cast<ld>(k) * h;
      const ld e = std::exp(-l) * (upper ? 1 - ExpError(l) : 1 + ExpError(l));
      s += r[k] * (1 + e);
    }
    const ld rounding = static_cast<ld>(k_max + 4) * 2 * kLdUnit;
    *sum = s * (upper ? 1 - rounding : 1 + rounding);
  };
  ld s = 0;
  total(&s);
  if (!upper) {
    // (R2), lower: trim the lowest positive losses until s <= 1. Each unit of P-mass at
    // l_k carries at most 1 + e^{-l_k} <= 2 of s; the margin covers rounding, and the loop
    // recomputes s from the trimmed masses until it holds.
    for (int round = 0; s > 1 && round < 8; ++round) {
      ld excess = (s - 1) * (1 + 1e-9_ld) + 4 * kLdMin;
      for (int64_t k = 1; k <= k_max && excess > 0; ++k) {
        if (r[k] <= 0) continue;
        const ld carries =
            1 + std::exp(-static_cast<ld>(k) * h) * (1 + ExpError(static_cast<ld>(k) * h));
        const ld cut = std::min(r[k], excess / carries * (1 + 1e-9_ld));
        r[k] -= cut;
        if (r[k] < 4 * kLdMin) r[k] = 0;
        excess -= cut * carries;
      }
      total(&s);
    }
    if (s > 1) {  // cannot happen with finite masses; keep the bound certified anyway
      std::fill(r.begin(), r.end(), 0);
      out.infinity_mass = 0;
      s = 0;
    }
  }
  for (int64_t k = 1; k <= k_max; ++k) {
    if (r[k] <= 0) continue;
    const ld l = static_cast<ld>(k) * h;
    const ld e = std::exp(-l);
    out.mass[k_max + k] = r[k];
    out.mass[k_max - k] = upper ? r[k] * e * (1 + ExpError(l)) + 4 * kLdMin
                                : std::max<ld>(0, r[k] * e * (1 - ExpError(l)));
  }
  // The atom at loss 0: 1 - s, rounded to the bound's side (one subtraction: 1 ulp).
  const ld w0 = std::max<ld>(0, 1 - s);
  out.mass[k_max] =
      upper ? w0 * (1 + 4 * kLdUnit) + (w0 > 0 ? 4 * kLdMin : 0) : w0 * (1 - 4 * kLdUnit);
  return out;
}

void SymmetrizeRemovePmfs(const ComponentPmfs& poisson, double h, ComponentPmfs* out) {
  out->upper = SymmetrizeRemovePmf(poisson.upper, h, Bound::kUpper);
  out->lower = SymmetrizeRemovePmf(poisson.lower, h, Bound::kLower);
  out->lower_alt = poisson.lower_alt.mass.empty()
                       ? Pmf()
                       : SymmetrizeRemovePmf(poisson.lower_alt, h, Bound::kLower);
}

namespace {

// RealizedPairEvent below one node; *changed is set where a node was replaced.
Result<Event> Realize(const Event& event, bool* changed) {
  switch (event.kind()) {
    case EventKind::kSampledWithoutReplacement: {
      Result<Event> inner = Realize(event.inner(), changed);
      if (!inner.ok()) return inner;
      if (event.sample_size() >= event.population()) return inner;
      *changed = true;
      return Event::PoissonSampled(
          WithoutReplacementRate(event.population(), event.sample_size(), Bound::kLower), *inner);
    }
    case EventKind::kPoissonSampled: {
      Result<Event> inner = Realize(event.inner(), changed);
      if (!inner.ok()) return inner;
      return Event::PoissonSampled(event.sampling_rate(), *inner);
    }
    case EventKind::kSelfComposed: {
      Result<Event> inner = Realize(event.inner(), changed);
      if (!inner.ok()) return inner;
      return Event::SelfComposed(*inner, event.count());
    }
    case EventKind::kComposed: {
      std::vector<Event> children;
      children.reserve(event.children().size());
      for (const Event& child : event.children()) {
        Result<Event> c = Realize(child, changed);
        if (!c.ok()) return c;
        children.push_back(std::move(c).value());
      }
      return Event::Composed(std::move(children));
    }
    default:
      return event;
  }
}

}  // namespace

Result<std::optional<Event>> RealizedPairEvent(const Event& event) {
  bool changed = false;
  Result<Event> realized = Realize(event, &changed);
  if (!realized.ok()) return realized.error_value();
  if (!changed) return std::optional<Event>();
  return std::optional<Event>(std::move(realized).value());
}

}  // namespace dpkit::accounting::pld_internal
