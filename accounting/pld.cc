#include "accounting/pld.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accounting/internal/format.h"
#include "unsupported/Eigen/FFT"

// ---------------------------------------------------------------------------------
// Mathematical summary (the proofs the certified bounds rest on).
//
// Notation. A PLD is the law of L = log(dP/dQ) under P (with an atom at +inf for the
// P-mass where Q = 0). With x = e^eps, delta(x) = E_P[(1 - x e^{-L})_+] + P(L = inf)
// is convex and non-increasing in x, and delta'(x) = -Q(L > log x).
//
// (1) Dominance is kept by composition. If the tradeoff function of pair A is pointwise
//     below that of pair B (equivalently delta_A(eps) >= delta_B(eps) for all eps), the
//     same holds after composing both with any third pair (Dong, Roth, Su 2019, Lemma
//     3.? "tensor product is monotone"; Zhu, Dong, Wang 2022, Thm. 10). So it suffices
//     to dominate (resp. be dominated by) each component.
//
// (2) Pessimistic component: connect-the-dots (Doroshenko et al. 2022, Alg. 1/Thm. 3).
//     On the grid eps_i = i h, the P-mass of each loss value l in a cell (a, b] is split
//     between a and b with weights w_a + w_b = 1 and w_a e^{-a} + w_b e^{-b} = e^{-l}
//     (P- and Q-mass preserved). For x <= e^a both contributions equal 1 - x e^{-l};
//     for x >= e^b both are 0; in between the split is the chord of the convex function
//     (1 - x e^{-l})_+, so it lies above it. Hence the split PLD dominates. Mass below
//     the lowest grid point is moved up to it (larger loss dominates, as
//     (1 - x e^{-l})_+ is non-decreasing in l) and mass above the highest grid point is
//     moved to +inf. Per cell (a,b] with P-mass A and Q-mass B:
//        mass moved to b: W = (e^{-a} A - B) / (e^{-a} - e^{-b}),  to a: A - W.
//
// (2b) Cell moments of the Gaussian base by Gauss-Legendre quadrature with a certified
//     error bound, where the tail differences leave them too uncertain: see the comment
//     above GlRule, next to the code.
//
// (3) Optimistic component. What makes a lower bound: for a measure p on grid losses with
//     total P-mass <= 1 (Q-mass unconstrained) whose delta-curve
//     g(x) = sum_j p_j (1 - x e^{-l_j})_+ is <= delta(x) for every x >= 0, the composition
//     with ANY pair R satisfies E_p[delta_R(x e^{-l})] <= E_P[delta_R(x e^{-L})]: delta_R is
//     convex, non-increasing and bounded, so delta_R(y) = c + int t (1 - y/t)_+ dnu(t)
//     with c = delta_R(inf) >= 0, nu >= 0, and both sides are c (P-mass) plus an integral of
//     t g(x/t) <= t delta(x/t). Dropping mass or moving P-mass to a lower loss only lowers g.
//     Three constructions are used, all from the cell moments:
//  (3a) Tangent-corrected: g_i = delta_i - m_i where m_i >= the largest excess of the chord
//     of delta over delta on the two cells adjacent to x_i. On a cell, delta is above both
//     end tangents; the chord minus the larger tangent is maximal where the tangents
//     meet, giving the excess bound E = c d / (c + d), c = A - x_a B, d = x_b B - A.
//     Kinks where g is not convex are removed (the chord over a concave kink lies
//     below g), and the top of g is replaced by max(g, 0) with the last kink moved down
//     to a grid point (moving P-mass to a lower loss is dominated). Its error is second
//     order in h per cell, but it lowers g at the bottom as well, i.e. it loses P-mass
//     eta per step, which compounds to T eta; where a step's mass sits in a few cells
//     (sigma 0.5, q 1e-3: a bulk about q wide) that is first order and ruinous.
//  (3b) Mass-preserving chain. Each cell (x_i, x_{i+1}] is first merged into one atom: its
//     P- and Q-mass at the ratio point xs = A/B (a post-processing, so dominated); with
//     only [c_lo, c_up], [d_lo, d_up] known, the atom at xs' = x_i + a_i,
//     a_i = dx_i c_lo / (c_lo + d_up) <= xs - x_i, with Q-mass B' = (c_lo + d_lo)/dx_i <= B
//     has (A' - x B')_+ <= (A - x B)_+ for all x (A' <= A and xs' <= xs). Let delta_a be
//     the curve of these atoms (convex, one kink per cell, slope S_i left of atom i).
//     The chain sends Q-mass e_i of atom i to x_i and r_i = B'_i - e_i (or less) to x_{i+1}:
//     the grid measure q_i = r_{i-1} + e_i, whose curve g has slope S_i + e_i on cell i and
//     agrees with delta_a left of x_0 (so the P- and Q-mass are those of the atoms). With
//     G = delta_a - g (piecewise linear between x_i, xs_i, x_{i+1}):
//        G_0 = 0,  G(xs_i) = G_i - e_i a_i,  G_{i+1} = G_i - e_i a_i + r_i b_i,
//     (b_i = x_{i+1} - xs_i), so g <= delta_a exactly when e_i a_i <= G_i for all i. The
//     largest such e_i = min(B'_i, G_i / a_i) is taken; G is tracked as a certified
//     interval with directed rounding. At the top g = delta_a - G_n < 0 beyond the atoms:
//     g is cut at a grid point k with g(x_k) = D_k - G_k >= 0 (D_k = delta_a(x_k), a sum
//     of non-negative terms), keeping q_j for j < k and P-mass x_k sum_{j>=k} q_j + g(x_k)
//     at x_k; that curve is <= g on [0, x_k] (their difference is linear there, <= 0 at 0
//     and at x_k) and 0 beyond. The chain keeps both masses, so it only loses at second
//     order where the bulk is spread over cells; but the gap G it carries out of a steep
//     bulk is not repaid in a thin tail, which it then loses (e.g. tiny delta queries).
//  (3c) Combination (CombineLowerPmfs): with g1 the chain and g2 the tangent PMF, at a
//     grid point k with g1(x_k) >= g2(x_k) and p* = P1(j >= k) - P2(j > k) >= 0, the PMF
//     {p1_j for j < k, p* at k, p2_j for j > k} has curve g2 on [x_k, inf) and below g1 on
//     [0, x_k] (difference linear there: <= 0 at x = 0 by the p* choice and at x_k by the
//     first condition). k is just below the last point where g2 is certifiably above g1.
//     CertifiedBoundsOnGrid also composes the tangent PMFs alone where the gap is wide
//     and keeps the larger certified lower bound.
//     The optimistic PLD differs from the pessimistic one only at second order in h
//     where the loss is spread over many cells, so both bounds approach the exact value
//     as h^2 (T h^2 for T compositions).
//
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
//     Support: the linear composition has no mass outside the grid indices
//     [sum_c T_c a_c, sum_c T_c b_c] (a_c, b_c: component c's lowest and highest index of
//     positive mass), so window entries outside count as 0 in the upper bound (0 is the
//     exact linear mass there; aliased mass is never needed; the lower bound keeps its
//     entries, which are below the circular ones, and subtracts the aliasing as before).
//     Otherwise the per-entry error bound, untilted by e^{K - lambda l}, puts spurious mass
//     at the far end of a wide window (q = 1e-6, sigma = 0.3, T = 1e7, delta = 0.1: a
//     first-stage window (6) reaching 120 below the support, an upper PMF of total mass
//     4e16, epsilon <= 8.70; now 0.24).
//     Frequencies whose bound (|X| + e)^T is below e^-700 are set to 0 and that bound is
//     added to the error sum (Compose). The untilted weights of the delta curve carry
//     256 double ulps each (MakeCurve), and DeltaAt adds/subtracts that relative error of
//     BOTH terms of s1 - e^eps s2 (not of their difference, which may cancel).
//
// (5) Directions and grids (CertifiedBounds). eps = max over the two directions, so the
//     certified upper bound is the maximum of the two certified upper bounds, and any
//     certified lower bound of either direction is a certified lower bound of eps; the
//     lower bound of the direction with the larger upper bound is within one gap of the
//     exact value. A direction whose certified upper bound on a coarser grid is already
//     <= the other's certified upper bound cannot change the maximum and is skipped. Any
//     two certified results (different grids) may be combined as [max lower, min upper].
//
// (6) Two-stage composition of one component used T times (T1 ~ sqrt(T) steps on the
//     fine grid, re-discretised onto a coarser grid, then powered): see the comment
//     above FloorDiv, next to the code.
//
// (7) Decomposed lower bound for one component whose per-step bulk is narrower than the
//     grid can resolve (small q and sigma): see the comment above DecomposedBound.
//
// (8) The delta-curve's second suffix sum relative to offsets, so that composed losses
//     beyond the exponent range (eps > ~11400) keep both bounds certified: see the comment
//     above MakeCurve.
// ---------------------------------------------------------------------------------

namespace dpkit::accounting {
namespace {

using ld = long double;
using internal::FormatDouble;

// The unit of the long double rounding errors that the bounds allow for. Under Emscripten
// long double is IEEE binary128, but its libm (musl) computes the long double exp, expm1,
// log, log1p, erfc, ... in double: the argument is rounded to double and the result is a
// double. Every allowance of this file is a multiple of this unit (relative errors of
// a few units per function, and |argument| units where an argument carries rounding), so
// there the unit is that of double, doubled for the two roundings (argument and result).
#if defined(__EMSCRIPTEN__)
constexpr ld kLdUnit = DBL_EPSILON;
#else
constexpr ld kLdUnit = LDBL_EPSILON / 2;
#endif
constexpr double kUnit = DBL_EPSILON / 2;
// Error allowance for a CDF value computed in long double (erfc, exp, threshold).
constexpr ld kCdfUlps = 256;
// Largest number of grid points of one component (about 270 bytes each while it is
// built) and of the FFT window (about 150 bytes each): a few hundred MB at most, and
// seconds, not minutes.
constexpr int64_t kMaxGridPoints = int64_t{1} << 21;
constexpr int64_t kMaxWindowPoints = int64_t{1} << 22;
// Largest |privacy loss| a component's grid covers: e^{kMaxLoss} must stay far below
// LDBL_MAX ~ e^{11356}. Losses beyond it are certified as described in
// BuildContinuousPmfs; an epsilon above it is reported as +inf.
constexpr long double kMaxLoss = 10000;
// Every error for exceeding those limits starts with this (CertifiedBounds then retries on
// a coarser grid).
constexpr char kGridLimitError[] = "the privacy loss grid would need ";

std::string GridLimitError(int64_t need, int64_t limit, double h) {
  return kGridLimitError + std::to_string(need) + " points (limit " + std::to_string(limit) +
         ") at spacing " + internal::FormatDouble(h) +
         "; increase epsilon_tolerance or discretization_interval";
}

// kBoundedRange: any eps-bounded-range mechanism (parameter eps); see BuildDirection.
// kDiscreteGaussian: N_Z(0, sigma^2) on an integer query (parameter sigma, and
// `sensitivity`); see DiscreteGaussianTails.
// kSampledComposition: Poisson sampling (rate sampling_rate) of a composition, the JSON of
// the composed event in `inner`, parameter an estimate of the per-step loss standard
// deviation (grid choice only); see BuildSampledCompositionPmfs.
enum class Base {
  kGaussian,
  kLaplace,
  kRandomizedResponse,
  kBoundedRange,
  kDiscreteGaussian,
  kSampledComposition
};
enum class Direction { kRemove, kAdd };

// One component of a composition: a base mechanism, optionally Poisson subsampled.
struct Mechanism {
  Base base;
  double parameter;      // noise multiplier (Gaussian), scale (Laplace), eps (RR), sigma (DG)
  double sampling_rate;  // 1 = not subsampled
  double rr_delta;       // ApproxDp delta (RR only)
  int64_t sensitivity = 0;  // integer L2 sensitivity (discrete Gaussian only)
  std::string inner = {};   // the sampled composition's event JSON (kSampledComposition)
  bool operator<(const Mechanism& o) const {
    return std::tie(base, parameter, sampling_rate, rr_delta, sensitivity, inner) <
           std::tie(o.base, o.parameter, o.sampling_rate, o.rr_delta, o.sensitivity, o.inner);
  }
};

Result<void> Flatten(const Event& event, double count, double sampling_rate,
                     std::map<Mechanism, double>* out);

// A Poisson-sampled composition becomes one component (BuildSampledCompositionPmfs). Its
// grid-choice parameter: with V the summed rough loss variances of the unsampled inner
// components (1/z^2, 1/b^2, D^2/s^2, eps^2), the subsampled step's loss variance is taken
// as min(q^2 (e^V - 1), q (V + V^2/4)), as ChooseInterval does for a Gaussian.
Result<void> FlattenSampledComposition(const Event& event, double count, double sampling_rate,
                                       std::map<Mechanism, double>* out) {
  std::map<Mechanism, double> inner;
  DPKIT_RETURN_IF_ERROR(Flatten(event, 1.0, 1.0, &inner));
  double v = 0;
  for (const auto& [m, c] : inner) {
    if (m.base == Base::kSampledComposition || m.sampling_rate < 1) {
      return Error{"the pld accountant cannot Poisson-sample a composition that contains a "
                   "Poisson-sampled event (use --accountant=rdp)"};
    }
    const double p = m.parameter;
    switch (m.base) {
      case Base::kGaussian:
      case Base::kLaplace:
        v += c / (p * p);
        break;
      case Base::kDiscreteGaussian:
        v += c * std::pow(static_cast<double>(m.sensitivity) / p, 2);
        break;
      default:
        v += c * p * p;
    }
  }
  const double q = sampling_rate;
  v = std::min(q * q * std::expm1(std::min(v, 700.0)), q * (v + v * v / 4));
  Mechanism m{Base::kSampledComposition, std::sqrt(std::min(v, 1e300)), sampling_rate, 0};
  m.inner = event.ToJsonString();
  (*out)[m] += count;
  return OkResult();
}

// Flattens an event tree into (mechanism, count) with counts multiplied out.
Result<void> Flatten(const Event& event, double count, double sampling_rate,
                     std::map<Mechanism, double>* out) {
  switch (event.kind()) {
    case EventKind::kGaussian:
      (*out)[{Base::kGaussian, event.noise_multiplier(), sampling_rate, 0}] += count;
      return OkResult();
    case EventKind::kLaplace:
      (*out)[{Base::kLaplace, event.scale(), sampling_rate, 0}] += count;
      return OkResult();
    case EventKind::kDiscreteGaussian:
      (*out)[{Base::kDiscreteGaussian, event.sigma(), sampling_rate, 0,
              event.sensitivity()}] += count;
      return OkResult();
    case EventKind::kBoundedRange:
      if (sampling_rate < 1) {
        return Error{"the pld accountant supports Poisson sampling only of gaussian, "
                     "discrete_gaussian and laplace events and of compositions"};
      }
      (*out)[{Base::kBoundedRange, event.epsilon(), 1.0, 0.0}] += count;
      return OkResult();
    case EventKind::kPureDp:
    case EventKind::kApproxDp:
      if (sampling_rate < 1) {
        return Error{"the pld accountant supports Poisson sampling only of gaussian, "
                     "discrete_gaussian and laplace events and of compositions"};
      }
      (*out)[{Base::kRandomizedResponse, event.epsilon(), 1.0,
              event.kind() == EventKind::kApproxDp ? event.delta() : 0.0}] += count;
      return OkResult();
    case EventKind::kPoissonSampled:
      return Flatten(event.inner(), count, sampling_rate * event.sampling_rate(), out);
    case EventKind::kSampledWithoutReplacement:
      return Error{"the pld accountant does not support sampled_without_replacement "
                   "events (use --accountant=rdp)"};
    case EventKind::kSelfComposed:
      if (sampling_rate < 1) return FlattenSampledComposition(event, count, sampling_rate, out);
      return Flatten(event.inner(), count * static_cast<double>(event.count()),
                     sampling_rate, out);
    case EventKind::kComposed:
      if (sampling_rate < 1) return FlattenSampledComposition(event, count, sampling_rate, out);
      for (const Event& child : event.children()) {
        DPKIT_RETURN_IF_ERROR(Flatten(child, count, sampling_rate, out));
      }
      return OkResult();
  }
  return Error{"unknown event kind"};
}

// Standard normal upper tail Phi(-z) = P(N(0,1) > z), accurate in both tails.
ld NormalUpper(ld z) { return 0.5L * std::erfc(z / std::sqrt(2.0L)); }

// Tail probabilities of the base privacy loss ell = log(dB/dA), where A is the output
// without the record and B with it: A(ell > t), A(ell <= t), B(ell > t), B(ell <= t)
// (strict) or the same with >= / < (inclusive). The smaller of each pair is computed
// directly so that it keeps full relative precision.
// For the continuous bases every value is accurate to kCdfUlps ulps. A lattice base (the
// discrete Gaussian) also states absolute error bounds a_err (on a_above and a_below) and
// b_err, and `atoms`, a key of the set of atoms above the threshold: equal keys at two
// thresholds mean that no atom lies between them, so the cell between is exactly empty
// (NaN when not known: continuous bases, or an atom within rounding of the threshold).
struct BaseTails {
  ld a_above, a_below, b_above, b_below;
  ld a_err = 0, b_err = 0;
  ld atoms = std::numeric_limits<ld>::quiet_NaN();
};

// t_err bounds the error of the threshold t itself (Poisson subsampling's map, see
// SubsampledThreshold): each tail then moves by at most the density of z = s t +- 1/(2s)
// times s t_err, which goes into a_err / b_err (twice that, as a margin).
BaseTails GaussianTails(ld sigma, ld t, ld t_err = 0) {
  // A = N(0, s^2), B = N(1, s^2): ell(o) = (2o - 1)/(2 s^2); ell > t <=> o > s^2 t + 1/2.
  BaseTails r;
  const ld za = sigma * t + 0.5L / sigma;
  const ld zb = sigma * t - 0.5L / sigma;
  // (The errors of za and zb are added below, once the tails are known.)
  if (za >= 0) {
    r.a_above = NormalUpper(za);
    r.a_below = 1 - r.a_above;
  } else {
    r.a_below = NormalUpper(-za);
    r.a_above = 1 - r.a_below;
  }
  if (zb >= 0) {
    r.b_above = NormalUpper(zb);
    r.b_below = 1 - r.b_above;
  } else {
    r.b_below = NormalUpper(-zb);
    r.b_above = 1 - r.b_below;
  }
  // Each tail moves by at most the density near z times the error of z: the threshold's
  // (s t_err) plus the rounding of s t +- 1/(2 s) (a few ulps of s |t| + 1/s, which the
  // kCdfUlps allowance does not cover where |z| is large, or where s t and 1/(2 s) cancel).
  // The density without another exp: phi(z) <= 0.4, and for |z| >= 1 the Mills ratio gives
  // phi(z) <= (smaller tail) (1 + z^2) / |z|; dz is far below 1/|z|, so the factor 2 also
  // covers phi's change over [|z| - dz, |z| + dz].
  const ld dz = sigma * t_err + 4 * kLdUnit * (sigma * std::fabs(t) + 1 / sigma);
  auto density = [](ld z, ld tail) {
    const ld a = std::fabs(z);
    return a >= 1 ? std::min<ld>(0.4L, tail * (1 + a * a) / a) : 0.4L;
  };
  r.a_err = 2 * density(za, std::min(r.a_above, r.a_below)) * dz;
  r.b_err = 2 * density(zb, std::min(r.b_above, r.b_below)) * dz;
  return r;
}

// t_err as for GaussianTails: inside (-1/b, 1/b) the tails have density at most 1/4 in
// ell; within 2 t_err of an atom (ell = +-1/b) the side the atom falls on is uncertain and
// its mass (at most 1/2) is added to the errors.
BaseTails LaplaceTails(ld b, ld t, bool inclusive, ld t_err = 0) {
  // A = Lap(0, b), B = Lap(1, b): ell(o) = (|o| - |o - 1|)/b in [-1/b, 1/b], with atoms
  // A(ell = -1/b) = 1/2, A(ell = 1/b) = e^{-1/b}/2, B(ell = -1/b) = e^{-1/b}/2,
  // B(ell = 1/b) = 1/2. Inside, ell > t <=> o > (b t + 1)/2.
  const ld lo = -1 / b, hi = 1 / b;
  const bool all = inclusive ? t <= lo : t < lo;
  const bool none = inclusive ? t > hi : t >= hi;
  ld err = 0;
  if (t_err > 0) {
    err = t_err / 2;
    if (std::fabs(t - lo) <= 2 * t_err || std::fabs(t - hi) <= 2 * t_err) err += 0.5L;
  }
  if (all) {
    BaseTails r{1, 0, 1, 0};
    r.a_err = r.b_err = err;
    return r;
  }
  if (none) {
    BaseTails r{0, 1, 0, 1};
    r.a_err = r.b_err = err;
    return r;
  }
  const ld o = std::min<ld>(1, std::max<ld>(0, (b * t + 1) / 2));
  BaseTails r;
  r.a_above = 0.5L * std::exp(-o / b);
  r.a_below = 1 - r.a_above;
  r.b_below = 0.5L * std::exp(-(1 - o) / b);
  r.b_above = 1 - r.b_below;
  // The exponents o/b and (1 - o)/b carry the rounding of o (a few ulps of |b t| + 1, over
  // b) and of the division: a relative error of the exp beyond what kCdfUlps covers where
  // 1/b or |t| is large.
  const ld rel = 4 * kLdUnit * (std::fabs(t) + 2 / b + 2);
  r.a_err = err + rel * r.a_above;
  r.b_err = err + rel * r.b_below;
  return r;
}

// Tail sums of the discrete Gaussian N_Z(0, s^2): p(x) = f(x) / Z on the integers,
// f(x) = e^{-x^2/(2 s^2)}, Z = sum_x f(x) (Canonne, Kamath, Steinke 2020, Def. 1), with a
// certified absolute error bound on every value. Only the small side U(k) = sum_{x>=k}
// f(x), k >= 1, is computed; the other side is 1 minus it (or by symmetry x -> -x).
//  * s <= kDirectSigma: U(k) is a suffix sum, summed from the far end in long double
//    (all terms positive: relative error <= (number of terms) u, plus the exp rounding
//    (x^2/(2 s^2) + 2) u per term), precomputed for k <= J = ceil(150.4 s) + 1, where
//    f(J) < e^{-11300}; the rest, sum_{x>J} f(x) <= f(J+1) / (1 - e^{-(2J+3)/(2s^2)})
//    (the ratios f(x+1)/f(x) decrease), is added to the error. Z = 1 + 2 U(1).
//  * s > kDirectSigma: Euler-Maclaurin summation with remainder of order 5 (DLMF 2.10.1;
//    the Fourier series of the periodic Bernoulli functions, DLMF 24.8.1-24.8.2, give
//    |B~_5(x)|/5! <= 2 zeta(5)/(2 pi)^5 < 2.2e-4):
//      U(a) = I(a) + f(a)/2 - f'(a)/12 + f'''(a)/720 + R,
//      |R| <= 2.2e-4 int_a^inf |f^(5)| = 2.2e-4 TV(f^(4) on [a, inf)),
//    with I(a) = int_a^inf f = s sqrt(pi/2) erfc(a/(s sqrt 2)) and, for y = x/s,
//    f^(n)(x) = (-1)^n He_n(y) f(x) / s^n (Hermite polynomials). The total variation of
//    f^(4) = He_4(y) e^{-y^2/2} / s^4 on [a, inf) is evaluated exactly from its values at
//    a and at the zeros y^2 = 5 -+ sqrt(10) of He_5 beyond a (f^(4) is monotone between
//    them). Relative to U the remainder is ~1e-4 y^5 / s^5: below 1e-9 for s > 512 and
//    every tail above 1e-300. Z = s sqrt(2 pi) (1 + 2 sum_{n>=1} e^{-2 pi^2 s^2 n^2}) by
//    Poisson summation; the correction is below e^{-5e6}. The main terms are accurate
//    to kCdfUlps (1 + y^2) ulps (erfc, and exp of -y^2/2).
// Both ways the computed U carries an explicit error bound, so cell masses formed from
// it are certified (BuildContinuousPmfs adds the bounds to the pessimistic cell data and
// subtracts them from the optimistic, as it does for the continuous bases' rounding).
class DiscreteGaussianTails {
 public:
  static constexpr ld kDirectSigma = 512;

  explicit DiscreteGaussianTails(ld sigma) : sigma_(sigma) {
    if (sigma_ <= kDirectSigma) {
      const int64_t j = static_cast<int64_t>(std::ceil(150.4L * sigma_)) + 1;
      suffix_.assign(j + 2, 0);  // suffix_[k] = sum_{x=k}^{j} f(x), k in [1, j]
      const ld inv = 1 / (2 * sigma_ * sigma_);
      ld sum = 0;
      for (int64_t x = j; x >= 1; --x) {
        const ld xx = static_cast<ld>(x);
        sum += std::exp(-xx * xx * inv);
        suffix_[x] = sum;
      }
      const ld next = static_cast<ld>(j + 1);
      beyond_ = std::exp(-next * next * inv) / -std::expm1(-(2 * next + 1) * inv);
      beyond_ = beyond_ * (1 + 1e-10L) + 4 * LDBL_MIN;
      // Recursive summation of j positive terms (j ulps), each an exp of an argument
      // a <= 11400 computed to 3 ulps (so 3 a + 2 ulps of the term).
      suffix_rel_ = (static_cast<ld>(j) + 4 * 11400 + 16) * kLdUnit;
      z_ = 1 + 2 * suffix_[1];
      z_err_ = 2 * (beyond_ + suffix_rel_ * suffix_[1]) + 2 * kLdUnit * z_;
    } else {
      z_ = sigma_ * std::sqrt(2 * static_cast<ld>(M_PI));
      z_err_ = 8 * kLdUnit * z_;
    }
  }

  // P(X >= k) and P(X < k) = P(X >= 1 - k) for an integer-valued k (the smaller one
  // computed directly), and one absolute error bound for both (beyond kCdfUlps ulps).
  void Split(ld k, ld* above, ld* below, ld* err) const {
    ld small, small_err;
    if (k >= 1) {
      Upper(k, &small, &small_err);
      *above = small;
      *below = 1 - small;
    } else {
      Upper(1 - k, &small, &small_err);
      *below = small;
      *above = 1 - small;
    }
    // The rounding of 1 - small is relative to the larger value, within the kCdfUlps
    // that BuildContinuousPmfs allows for every tail; the stated error is the small one's
    // (relative to it: Q-tails are multiplied by e^loss, up to e^10000).
    *err = small_err;
  }

  // An upper bound on P(X = x).
  ld PmfUpper(ld x) const {
    const ld y = x / sigma_;
    return std::exp(-y * y / 2) / z_ * (1 + 1e-12L) + 4 * LDBL_MIN;
  }
  // A lower bound on P(X = x) (exp of -y^2/2 to (1.5 y^2 + 1) ulps, Z to z_err).
  ld PmfLower(ld x) const {
    const ld y = x / sigma_;
    const ld f = std::exp(-y * y / 2);
    return std::max<ld>(0,
                        f * (1 - (2 * y * y + 8) * kLdUnit) / (z_ + z_err_) * (1 - 4 * kLdUnit));
  }

 private:
  // P(X >= k) for an integer-valued k >= 1, and an absolute error bound.
  void Upper(ld k, ld* value, ld* err) const {
    ld u, u_err;
    if (sigma_ <= kDirectSigma) {
      const int64_t last = static_cast<int64_t>(suffix_.size()) - 2;
      if (k > static_cast<ld>(last)) {
        u = 0;
        u_err = beyond_;
      } else {
        u = suffix_[static_cast<int64_t>(k)];
        u_err = beyond_ + suffix_rel_ * u;
      }
    } else {
      const ld y = k / sigma_;
      const ld f = std::exp(-y * y / 2);
      const ld integral = sigma_ * std::sqrt(static_cast<ld>(M_PI) / 2) *
                          std::erfc(y / std::sqrt(static_cast<ld>(2)));
      const ld s3 = sigma_ * sigma_ * sigma_;
      const ld d1 = -y * f / sigma_;                // f'(a)
      const ld d3 = -(y * y * y - 3 * y) * f / s3;  // f'''(a)
      u = integral + f / 2 - d1 / 12 + d3 / 720;
      const ld main = integral + f / 2 + std::fabs(d1) / 12 + std::fabs(d3) / 720;
      u_err = 2.2e-4L * FourthDerivativeVariation(y) / (s3 * sigma_) * 1.01L +
              kCdfUlps * kLdUnit * (1 + y * y) * main + 4 * LDBL_MIN;
    }
    *value = u / z_;
    *err = (u_err + *value * z_err_) / z_ * (1 + 1e-10L) + 4 * kLdUnit * *value;
  }

  // Total variation of g(y) = He_4(y) e^{-y^2/2} on [y0, inf), y0 >= 0.
  static ld FourthDerivativeVariation(ld y0) {
    auto g = [](ld y) {
      const ld y2 = y * y;
      return (y2 * y2 - 6 * y2 + 3) * std::exp(-y2 / 2);
    };
    const ld c1 = std::sqrt(5 - std::sqrt(static_cast<ld>(10)));
    const ld c2 = std::sqrt(5 + std::sqrt(static_cast<ld>(10)));
    ld tv = 0, prev = g(y0);
    for (ld c : {c1, c2}) {
      if (c > y0) {
        const ld v = g(c);
        tv += std::fabs(v - prev);
        prev = v;
      }
    }
    return (tv + std::fabs(prev)) * (1 + 1e-12L);  // g -> 0 at infinity
  }

  ld sigma_;
  std::vector<ld> suffix_;
  ld beyond_ = 0, suffix_rel_ = 0;
  ld z_ = 1, z_err_ = 0;
};

// Sign of the exact sum of the values (Shewchuk 1997, Grow-Expansion: repeated TwoSum
// keeps the sum exactly as a non-overlapping expansion of increasing magnitude, whose
// sign is that of its largest nonzero component). No overflow or underflow assumed.
int ExactSumSign(std::initializer_list<ld> values) {
  ld expansion[16];
  int size = 0;
  for (ld v : values) {
    ld q = v;
    int out = 0;
    for (int i = 0; i < size; ++i) {
      const ld sum = q + expansion[i];
      const ld b_virtual = sum - q;
      const ld err = (q - (sum - b_virtual)) + (expansion[i] - b_virtual);
      if (err != 0) expansion[out++] = err;
      q = sum;
    }
    expansion[out++] = q;
    size = out;
  }
  for (int i = size - 1; i >= 0; --i) {
    if (expansion[i] != 0) return expansion[i] > 0 ? 1 : -1;
  }
  return 0;
}

// Sign of ell(m) - t = ((m - D/2) D - s^2 t) / s^2 for an integer m with |m| < 2^62, computed
// exactly: m - D/2 is exact in long double, and each product is split exactly into a
// rounded value and its error with fma (TwoProduct).
int DiscreteLossSign(ld m, ld sensitivity, ld sigma, ld t) {
  const ld a = m - sensitivity / 2;
  const ld r1 = a * sensitivity, r2 = std::fma(a, sensitivity, -r1);
  const ld s1 = sigma * sigma, s2 = std::fma(sigma, sigma, -s1);
  const ld p1 = s1 * t, e1 = std::fma(s1, t, -p1);
  const ld p2 = s2 * t, e2 = std::fma(s2, t, -p2);
  return ExactSumSign({r2, -e2, -p2, -e1, -p1, r1});
}

// Base tails of the discrete Gaussian: A = N_Z(0, s^2), B = N_Z(D, s^2) with an integer
// sensitivity D. Both have the same normalising constant (Z is shift invariant over the
// integers), so on the integers ell(x) = log B(x)/A(x) = (2 x D - D^2)/(2 s^2): the loss
// takes the discrete values (D/s^2)(x - D/2), x integer, and
//   ell > t <=> x > tau = s^2 t / D + D/2,  ell >= t <=> x >= tau.
// A(ell > t) = P(X >= k), B(ell > t) = P(X >= k - D) with k the first integer above tau
// (at or above it when inclusive). t_err = 0 says that t is the exact threshold (the grid
// point itself, unsampled, or 0): an integer within rounding of tau is then placed by the
// exact sign test (atoms exactly on a grid point are common: e.g. ell = 0 for even D).
// Otherwise `t_err` bounds the error of t (the subsampling map); integers within the
// resulting error of tau may be on either side: their masses are added to the error
// bounds and `atoms` is left unknown (this needs a coincidence to ~1e-15 relative of a
// transcendental threshold with the lattice; it widens the bounds, never breaks them).
BaseTails DiscreteGaussianBaseTails(const DiscreteGaussianTails& dg, ld sigma, ld sensitivity,
                                    ld t, ld t_err, bool inclusive) {
  const ld scale = sigma * sigma / sensitivity;  // s^2 / D
  const ld tau = scale * t + sensitivity / 2;
  const ld tau_err = scale * t_err + 16 * kLdUnit * (scale * std::fabs(t) + sensitivity + 1);
  ld k = inclusive ? std::ceil(tau) : std::floor(tau) + 1;
  const ld m = std::nearbyint(tau);
  const bool near = std::fabs(tau - m) <= tau_err;
  const bool representable = std::fabs(tau) < 0x1p62L && tau_err < 0.25L;
  const bool exact = t_err == 0 && representable;
  if (near && exact) {
    // k is m or m + 1: the first integer whose loss is above t (at or above: inclusive).
    const int sign = DiscreteLossSign(m, sensitivity, sigma, t);
    k = (sign > 0 || (inclusive && sign == 0)) ? m : m + 1;
  }
  BaseTails r;
  dg.Split(k, &r.a_above, &r.a_below, &r.a_err);
  dg.Split(k - sensitivity, &r.b_above, &r.b_below, &r.b_err);
  r.atoms = k;
  if ((near && !exact) || !representable) {
    // The integers within tau_err of tau (at most 2 tau_err + 2 of them) may lie on the
    // other side: each moves its mass between the two sides of both pairs.
    const ld count = 2 * tau_err + 2;
    const ld nearest = std::max<ld>(0, std::fabs(tau) - tau_err - 1);
    const ld nearest_b = std::max<ld>(0, std::fabs(tau - sensitivity) - tau_err - 1);
    r.a_err += count * dg.PmfUpper(nearest);
    r.b_err += count * dg.PmfUpper(nearest_b);
    r.atoms = std::numeric_limits<ld>::quiet_NaN();
  }
  return r;
}

// `dg` is the discrete Gaussian's table (kDiscreteGaussian only); `t_err` bounds the
// rounding error of t (used by the lattice base only).
BaseTails BaseTailsAt(const Mechanism& m, ld t, ld t_err, bool inclusive,
                      const DiscreteGaussianTails* dg) {
  if (m.base == Base::kGaussian) return GaussianTails(m.parameter, t, t_err);
  if (m.base == Base::kDiscreteGaussian) {
    return DiscreteGaussianBaseTails(*dg, m.parameter, static_cast<ld>(m.sensitivity), t, t_err,
                                     inclusive);
  }
  return LaplaceTails(m.parameter, t, inclusive, t_err);
}

// Tails of the privacy loss L of one direction at l: P(L > l), P(L <= l), Q(L > l),
// Q(L <= l); p_err, q_err and atoms as in BaseTails (0, 0, NaN for continuous bases).
// t, t_err: the base threshold the tails were taken at (l itself unsampled; the subsampling
// map of l (remove) or -l (add) otherwise) and its error bound; t is NaN where the map has
// no finite value (all mass on one side).
struct LossTails {
  ld sp, fp, sq, fq;
  ld p_err = 0, q_err = 0;
  ld atoms = std::numeric_limits<ld>::quiet_NaN();
  ld t = std::numeric_limits<ld>::quiet_NaN(), t_err = 0;
};

// The base threshold t = log((e^l - 1 + q)/q) of a subsampled loss threshold l (both
// directions, with l -> -l for add), and a bound on its error against the exact value at
// the grid point l.
ld SubsampledThreshold(ld l, ld q, ld* t_err) {
  // t = log(1 + (e^l - 1)/q) (the caller checked e^l - 1 + q > 0, i.e. r > -1), computed
  // as log1p(r) so that its error is relative to t (log(v) - log(q) would carry an absolute
  // error of a few ulps of |log q| even where t is tiny, e.g. t ~ 1e-3 for q = 1e-4).
  const ld r = std::expm1(l) / q;
  const ld t = std::log1p(r);
  // r carries expm1's 2 ulps and the division's 1 (3 ulps relative); log1p moves that by
  // |dr| / (1 + r) and adds 2 ulps of t. Factor 2 of margin.
  *t_err = 2 * (4 * kLdUnit * std::fabs(r) / (1 + r) + 2 * kLdUnit * std::fabs(t)) +
           LDBL_MIN;
  return t;
}

LossTails LossTailsAt(const Mechanism& m, Direction dir, ld l,
                      const DiscreteGaussianTails* dg = nullptr) {
  const ld q = m.sampling_rate;
  if (dir == Direction::kRemove) {
    // P = (1-q) A + q B, Q = A, L = log(1 - q + q e^ell) (Zhu, Dong, Wang 2022, Sec. 5).
    // The grid point is l itself (t_err = 0: the lattice base places atoms against it
    // exactly); the subsampling map is exact at l = 0 only.
    ld t, t_err = 0;
    if (q == 1 || l == 0) {
      t = q == 1 ? l : 0;
    } else {
      if (std::expm1(l) + q <= 0) return {1, 0, 1, 0};
      t = SubsampledThreshold(l, q, &t_err);
    }
    const BaseTails b = BaseTailsAt(m, t, t_err, /*inclusive=*/false, dg);
    return {(1 - q) * b.a_above + q * b.b_above, (1 - q) * b.a_below + q * b.b_below,
            b.a_above, b.a_below, (1 - q) * b.a_err + q * b.b_err, b.a_err, b.atoms, t, t_err};
  }
  // P = A, Q = (1-q) A + q B, L = -log(1 - q + q e^ell): L > l <=> ell < t'.
  ld t, t_err = 0;
  if (q == 1 || l == 0) {
    t = q == 1 ? -l : 0;
  } else {
    if (std::expm1(-l) + q <= 0) return {0, 1, 0, 1};
    t = SubsampledThreshold(-l, q, &t_err);
  }
  const BaseTails b = BaseTailsAt(m, t, t_err, /*inclusive=*/true, dg);
  // b.*_above = P(ell >= t') = P(L <= l); b.*_below = P(ell < t') = P(L > l).
  return {b.a_below, b.a_above, (1 - q) * b.a_below + q * b.b_below,
          (1 - q) * b.a_above + q * b.b_above, b.a_err, (1 - q) * b.a_err + q * b.b_err,
          b.atoms, t, t_err};
}

// (2b) Cell moments of the Gaussian base by quadrature. A cell's moments c = A - e^a B and
// d = e^b B - A (2, 3a) are of second order in the cell width, while the tails they are
// formed from carry absolute errors of kCdfUlps ulps of the tail values. Connect-the-dots
// divides them by e^h - 1, so the relative error of a grid mass grows as 1/h and compounds
// over T steps (q 1e-4, sigma 20, T 1e6: 1e-7 per step at h 1e-7, a 12 % gap). For the
// Gaussian base both moments reduce to integrals of non-negative, smooth integrands, which
// Gauss-Legendre quadrature evaluates to a relative accuracy with a certified bound:
//  * Base pair: P_b = N(1, s^2), Q_b = N(0, s^2), ell(o) = (2o - 1)/(2 s^2); in the
//    standardised variable z = (o - 1)/s of P_b, ell = z/s + 1/(2 s^2), so on the base
//    cell ell in (u, v], i.e. z in (z_u, z_v], z_x = s x - 1/(2 s), W = z_v - z_u:
//      C(u, v) = P_b(I) - e^u Q_b(I) = int phi(z) (1 - e^{u - ell}) dz
//              = phi(z_u) int_0^W e^{-z_u y - y^2/2} (-expm1(-y/s)) dy,
//      D(u, v) = e^v Q_b(I) - P_b(I) = phi(z_u) int_0^W e^{-z_u y - y^2/2} expm1((W - y)/s) dy
//    (y = z - z_u; phi(z_u + y) = phi(z_u) e^{-z_u y - y^2/2}; Q_b's density is
//    e^{-ell} times P_b's).
//  * Subsampled pairs (LossTailsAt) with r = e^ell: remove, P = (1-q) Q_b + q P_b, Q = Q_b:
//    on the cell (a, b] of L = log(1 - q + q r), whose base cell is (t_a, t_b] with
//    e^{t_a} = 1 + (e^a - 1)/q, c = int (1 - q + q r - e^a) dQ_b = q int (r - e^{t_a}) dQ_b
//    = q C(t_a, t_b) and d = q D(t_a, t_b). Add, P = Q_b, Q = (1-q) Q_b + q P_b,
//    L = -log(1 - q + q r): the base cell is [t'_b, t'_a) with e^{-a} = 1 - q + q e^{t'_a};
//    then 1 - e^a (1 - q + q r) = q e^a (e^{t'_a} - r), so c = q e^a D(t'_b, t'_a) and
//    likewise d = q e^b C(t'_b, t'_a). q = 1: t = l (remove), t' = -l (add).
//  * Truncation: for f analytic in the Bernstein ellipse E_rho (foci -1, 1, semi-axis sum
//    rho) with |f| <= M there, the n-point Gauss rule on [-1, 1] errs by at most
//    64 M / (15 (1 - rho^-2) rho^{2n}) (Trefethen 2008, "Is Gauss quadrature better than
//    Clenshaw-Curtis?", Thm. 4.5; Approximation Theory and Approximation Practice,
//    Thm. 19.3); on [0, W] times W/2. With y = (W/2)(1 + xi), xi in E_rho: |y| and
//    |W - y| <= Y = (W/2)(1 + R), R = (rho + 1/rho)/2, |Im y| <= (W/2)(rho - 1/rho)/2 = b,
//    Re(-z_u y) <= max(-z_u Y, z_u (W/2)(R - 1)), |e^{-y^2/2}| <= e^{b^2/2} and
//    |expm1(w)| <= e^{|w|} - 1 <= |w| e^{|w|}, so M = e^{max(...) + b^2/2 + Y/s} Y/s. The
//    smallest bound over rho = 2, 4, ..., 2^12 (stopping where it starts to grow) is used,
//    for n = 5 or, where that bound is not far below the accuracy needed, n = 10.
//  * Rounding: all terms are positive; the evaluations (exp of arguments up to
//    |z_u| W + W^2 + z_u^2/2) stay within 64 (8 + |z_u| W + W^2 + z_u^2) ulps relative, and
//    the rule (Newton's method in long double, checked against the exact moments of
//    polynomials in pld_cell_moments_test.cc) within 256 ulps.
//  * Endpoints: the thresholds carry errors (SubsampledThreshold, and the rounding of the
//    grid value l = k h itself, which moves t by u |l| e^{l - t} / q). The integral above
//    is taken between the computed z_u and z_u + W; the exact endpoints are within e_u, e_v
//    of them. dC/dz_v = phi(z_v)(1 - e^{-W/s}) and |dC/dz_u| <= (1/s) int phi, so
//    |dC| <= phi_max (W'/s)(e_u + e_v); dD/dz_u = -phi(z_u) expm1(W/s) and
//    dD/dz_v <= (1/s) e^{W/s} int phi, so |dD| <= phi_max (W'/s) e^{W'/s} (e_u + e_v)
//    (expm1(x) <= x e^x), with W' = W + e_u + e_v and phi_max the largest density on the
//    widened interval.
//  * Applied where |z| <= 36 at both ends, |z_u| W <= 40 and W <= 4 (elsewhere the tail
//    differences are precise enough, or the mass negligible).
// BuildContinuousPmfs intersects these enclosures with the tail-difference ones.

// Gauss-Legendre rules with kGlPoints[r] points. Nodes: the zeros of the Legendre
// polynomial P_n by Newton's method (from cos(pi (i + 3/4)/(n + 1/2)), Tricomi's estimate),
// weights 2 / ((1 - x^2) P_n'(x)^2). trunc_log[k - 1]: the rho-dependent part of the log
// of the truncation bound at rho = 2^k (see GaussianCellMoments).
constexpr int kGlRules = 2;
// The quadrature's arithmetic: long double, except under Emscripten, whose long double
// arithmetic is software binary128 while its functions compute in double anyway (see
// kLdUnit, whose double-sized unit then also covers double arithmetic).
#if defined(__EMSCRIPTEN__)
using QuadFloat = double;
#else
using QuadFloat = ld;
#endif
constexpr int kGlPoints[kGlRules] = {5, 10};
constexpr int kGlMaxPoints = 10;
constexpr int kRhoSteps = 12;

struct GaussLegendreRule {
  int n;
  ld node[kGlMaxPoints];
  ld weight[kGlMaxPoints];
  ld trunc_log[kRhoSteps];
};

const GaussLegendreRule& GlRule(int r) {
  static const std::vector<GaussLegendreRule> rules = [] {
    std::vector<GaussLegendreRule> out;
    for (int n : kGlPoints) {
      GaussLegendreRule g{};
      g.n = n;
      for (int i = 0; i < n; ++i) {
        ld x = std::cos(static_cast<ld>(M_PI) * (i + 0.75L) / (n + 0.5L));
        ld derivative = 1;
        for (int iter = 0; iter < 60; ++iter) {
          ld p0 = 1, p1 = x;  // P_{k-1}, P_k
          for (int k = 2; k <= n; ++k) {
            const ld p2 = ((2 * k - 1) * x * p1 - (k - 1) * p0) / k;
            p0 = p1;
            p1 = p2;
          }
          derivative = n * (x * p1 - p0) / (x * x - 1);
          x -= p1 / derivative;
        }
        g.node[i] = x;
        g.weight[i] = 2 / ((1 - x * x) * derivative * derivative);
      }
      // Exactly symmetric (GaussianCellMoments pairs y with W - y).
      for (int i = 0; i < n / 2; ++i) {
        g.node[n - 1 - i] = -g.node[i];
        g.weight[n - 1 - i] = g.weight[i];
      }
      if (n % 2 == 1) g.node[n / 2] = 0;
      for (int k = 1; k <= kRhoSteps; ++k) {
        const ld rho = std::ldexp(1.0L, k);
        g.trunc_log[k - 1] = std::log1p((rho + 1 / rho) / 2) - std::log1p(-1 / (rho * rho)) -
                             2 * n * k * std::log(2.0L);
      }
      out.push_back(g);
    }
    return out;
  }();
  return rules[r];
}

// Enclosures [c - c_err, c + c_err] of C(u, v) and [d - d_err, d + d_err] of D(u, v) for
// the exact base thresholds within u_err, v_err of u < v. The 5-point rule is kept where
// its truncation bound is below 1e-3 `target` relative, else the 10-point one is used.
// false where the quadrature does not apply (far tails, cells wide against the density's
// scale).
struct CellMoments {
  ld c, c_err, d, d_err;
};
bool GaussianCellMoments(ld s, ld u, ld u_err, ld v, ld v_err, ld target, CellMoments* out) {
  const ld zu = s * u - 0.5L / s;
  const ld w = s * (v - u);
  const ld beta = -zu;
  // |z| <= 36: phi(z) > 1e-282, far from underflow also where the long double functions
  // compute in double (Emscripten, see kLdUnit); the integrand stays within e^{+-40}.
  if (!(w > 0) || !(std::fabs(zu) <= 36) || !(std::fabs(zu + w) <= 36) ||
      !(std::fabs(beta) * w <= 40) || !(w <= 4)) {
    return false;
  }
  // The sums and the truncation bound in QuadFloat.
  const QuadFloat qw = static_cast<QuadFloat>(w), qs = static_cast<QuadFloat>(s);
  const QuadFloat qbeta = static_cast<QuadFloat>(beta);
  // Truncation bound of rule r (without the factor phi(z_u)), from (2b) with
  // expm1(x) <= x e^x: (W/2) (64/15) e^{arg + Y/s} (Y/s) / ((1 - rho^-2) rho^{2n}),
  // Y = (W/2)(1 + R), minimised over rho = 2^k in the log domain (one exp).
  auto truncation = [&](const GaussLegendreRule& g) -> ld {
    QuadFloat best = std::numeric_limits<QuadFloat>::infinity();
    for (int k = 1; k <= kRhoSteps; ++k) {
      const QuadFloat rho = std::ldexp(QuadFloat{1}, k);
      const QuadFloat big_r = (rho + 1 / rho) / 2, im = qw / 2 * (rho - 1 / rho) / 2;
      const QuadFloat y_max = qw / 2 * (1 + big_r);
      const QuadFloat re = std::max(qbeta * y_max, -qbeta * qw / 2 * (big_r - 1));
      const QuadFloat arg = re + im * im / 2;
      if (arg > 600) break;
      const QuadFloat log_bound =
          arg + y_max / qs + static_cast<QuadFloat>(g.trunc_log[k - 1]);
      if (log_bound > best) break;
      best = log_bound;
    }
    if (!(best < 600)) return std::numeric_limits<ld>::infinity();
    // The log-domain sum carries at most ~700 |terms| ulps: (1 + 1e-9) covers its exp.
    return static_cast<ld>(std::exp(best)) * (w / 2) * (w / 2) * 64 / (15 * s) * (1 + 1e-9L);
  };
  const ld phi_u = std::exp(-zu * zu / 2) / std::sqrt(2 * static_cast<ld>(M_PI));
  ld sc = 0, sd = 0, trunc = 0;
  for (int r = 0; r < kGlRules; ++r) {
    const GaussLegendreRule& g = GlRule(r);
    // The nodes are symmetric, y_{n-1-i} = W - y_i: expm1((W - y_i)/s) = e[n-1-i], and
    // -expm1(-y/s) = e / (1 + e) with e = expm1(y/s).
    QuadFloat y[kGlMaxPoints], e[kGlMaxPoints], qc = 0, qd = 0;
    for (int i = 0; i < g.n; ++i) {
      y[i] = qw / 2 * (1 + static_cast<QuadFloat>(g.node[i]));
      e[i] = std::expm1(y[i] / qs);
    }
    for (int i = 0; i < g.n; ++i) {
      const QuadFloat f =
          static_cast<QuadFloat>(g.weight[i]) * std::exp(qbeta * y[i] - y[i] * y[i] / 2);
      qc += f * (e[i] / (1 + e[i]));
      qd += f * e[g.n - 1 - i];
    }
    sc = qc;
    sd = qd;
    trunc = truncation(g);
    if (trunc <= 1e-3L * target * std::min(sc, sd) * (w / 2)) break;
  }
  if (!(trunc < std::numeric_limits<ld>::infinity())) return false;
  const ld c = phi_u * w / 2 * sc;
  const ld d = phi_u * w / 2 * sd;
  trunc *= phi_u * (1 + 1e-10L);
  const ld rel = 64 * kLdUnit * (8 + std::fabs(beta) * w + w * w + zu * zu) + 256 * kLdUnit;
  // Endpoint errors.
  const ld e_u = s * u_err + 4 * kLdUnit * (s * std::fabs(u) + 1 / s);
  const ld e_v = e_u + s * (u_err + v_err) + 4 * kLdUnit * (w + s * std::fabs(v));
  const ld w_wide = w + e_u + e_v;
  const ld z_lo = zu - e_u, z_hi = zu + w + e_v;
  const ld nearest = z_lo <= 0 && z_hi >= 0 ? 0 : std::min(std::fabs(z_lo), std::fabs(z_hi));
  const ld phi_max = std::exp(-nearest * nearest / 2) / std::sqrt(2 * static_cast<ld>(M_PI)) *
                     (1 + 8 * kLdUnit * (nearest * nearest + 4));
  const ld dc = phi_max * (w_wide / s) * (e_u + e_v);
  // expm1(x) <= x e^x.
  const ld grow = std::exp(w_wide / s) * (1 + 8 * kLdUnit * (w_wide / s + 2));
  const ld dd = phi_max * (w_wide / s) * grow * (e_u + e_v);
  out->c = c;
  out->d = d;
  out->c_err = (trunc + rel * c + dc) * 1.01L + 4 * LDBL_MIN;
  out->d_err = (trunc + rel * d + dd) * 1.01L + 4 * LDBL_MIN;
  return true;
}

// The error bound of a base threshold LossTails::t, the map of l' = l (remove) or -l (add),
// against the threshold of the exact grid value k h, which l (rounded) is within kLdUnit |l|
// of: the map's own error plus that rounding times dt/dl' = e^{l'} / (q e^t) (1 unsampled;
// none at the exact l = 0).
ld GridThresholdError(ld q, ld l_signed, const LossTails& tails) {
  if (l_signed == 0) return 0;
  if (q == 1) return kLdUnit * std::fabs(l_signed);
  return tails.t_err + 2 * kLdUnit * std::fabs(l_signed) * std::exp(l_signed - tails.t) / q;
}

// Enclosures of the moments c, d of the cell (l_a, l_b] of a (sub)sampled Gaussian
// component in direction dir, by (2b), from the loss tails at its ends (LossTailsAt, which
// carry the base thresholds). false where (2b) does not apply.
bool GaussianLossCellMoments(const Mechanism& m, Direction dir, ld l_a, const LossTails& at_a,
                             ld l_b, const LossTails& at_b, ld target, CellMoments* out) {
  const ld q = m.sampling_rate, s = m.parameter;
  if (!std::isfinite(at_a.t) || !std::isfinite(at_b.t)) return false;
  const ld sign = dir == Direction::kRemove ? 1 : -1;
  const ld ta = at_a.t, tb = at_b.t;
  const ld ta_err = GridThresholdError(q, sign * l_a, at_a);
  const ld tb_err = GridThresholdError(q, sign * l_b, at_b);
  CellMoments base;
  if (dir == Direction::kRemove) {
    if (!GaussianCellMoments(s, ta, ta_err, tb, tb_err, target, &base)) return false;
    *out = {q * base.c, q * base.c_err + 4 * kLdUnit * q * base.c,
            q * base.d, q * base.d_err + 4 * kLdUnit * q * base.d};
    return true;
  }
  if (!GaussianCellMoments(s, tb, tb_err, ta, ta_err, target, &base)) return false;
  // c = q e^a D, d = q e^b C; exp of l carries (|l| + 2) ulps.
  const ld fa = q * std::exp(l_a), fb = q * std::exp(l_b);
  const ld ra = 8 * kLdUnit * (std::fabs(l_a) + 2), rb = 8 * kLdUnit * (std::fabs(l_b) + 2);
  *out = {fa * base.d, fa * base.d_err * (1 + ra) + ra * fa * base.d,
          fb * base.c, fb * base.c_err * (1 + rb) + rb * fb * base.c};
  // e^l overflows double (Emscripten's exp) above ~709: such cells keep the tail differences.
  return std::isfinite(out->c) && std::isfinite(out->c_err) && std::isfinite(out->d) &&
         std::isfinite(out->d_err);
}

// A PMF on the grid: mass[i] at loss (min_index + i) h, plus mass at +inf.
struct Pmf {
  int64_t min_index = 0;
  std::vector<ld> mass;
  std::vector<ld> log_mass;  // log(mass), -inf where mass <= 0 (filled by FillLogs)
  ld infinity_mass = 0;
};

// Removes non-convex kinks of an optimistic delta-curve (negative masses): each is
// merged into its nearest kept neighbours so that the curve becomes the chord over the
// kink, which lies below (see (3a) above). Q-masses (mass e^{-eps}) carry the slopes.
void RemoveNegativeKinks(ld h, std::vector<ld>* mass) {
  const int64_t n = static_cast<int64_t>(mass->size());
  std::vector<int64_t> prev(n), next(n);
  for (int64_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1;
  }
  std::vector<int64_t> work;
  for (int64_t i = 0; i < n; ++i) {
    if ((*mass)[i] < 0) work.push_back(i);
  }
  std::vector<char> removed(n, 0);
  while (!work.empty()) {
    const int64_t i = work.back();
    work.pop_back();
    if (removed[i] || (*mass)[i] >= 0) continue;
    const ld p = (*mass)[i];
    const int64_t j = prev[i], k = next[i];
    // Positions relative to x_i: x_j / x_i = e^{(j - i) h}.
    if (j < 0 && k >= n) {
      (*mass)[i] = 0;
    } else if (j < 0) {
      // Left neighbour is x = 0 (the chord to the origin): all P-mass goes to k.
      (*mass)[k] += p;
      if ((*mass)[k] < 0) work.push_back(k);
    } else if (k >= n) {
      // Right of the last kink the curve is flat: keep the Q-mass at j.
      (*mass)[j] += p * std::exp(static_cast<ld>(j - i) * h);
      if ((*mass)[j] < 0) work.push_back(j);
    } else {
      const ld xj = std::exp(static_cast<ld>(j - i) * h);
      const ld xk = std::exp(static_cast<ld>(k - i) * h);
      // Q-mass r = p / x_i splits as r (x_k - x_i)/(x_k - x_j) to j and
      // r (x_i - x_j)/(x_k - x_j) to k; P-mass = Q-mass * x.
      (*mass)[j] += p * xj * (xk - 1) / (xk - xj);
      (*mass)[k] += p * xk * (1 - xj) / (xk - xj);
      if ((*mass)[j] < 0) work.push_back(j);
      if ((*mass)[k] < 0) work.push_back(k);
    }
    (*mass)[i] = 0;
    removed[i] = 1;
    if (j >= 0) next[j] = k;
    if (k < n) prev[k] = j;
  }
}

// The tangent-corrected optimistic PMF of (3a) on the grid points lo, ..., lo + n.
void TangentLowerPmf(int64_t lo, double h, const std::vector<ld>& c_up,
                     const std::vector<ld>& d_up, const std::vector<ld>& c_lo,
                     const std::vector<ld>& d_lo, Pmf* lower) {
  const int64_t n = static_cast<int64_t>(c_up.size());
  const ld eh = std::exp(static_cast<ld>(h));
  const ld em1 = std::expm1(static_cast<ld>(h));
  // Optimistic masses: connect-the-dots with c_lo, d_lo, lowered by m (see (3a)).
  std::vector<ld> m_corr(n + 1, 0);
  auto excess = [&](int64_t i) -> ld {
    const ld s = c_up[i] + d_up[i];
    return s > 0 ? c_up[i] * d_up[i] / s : 0;
  };
  for (int64_t i = 0; i <= n; ++i) {
    ld v = 0;
    if (i > 0) v = std::max(v, excess(i - 1));
    if (i < n) v = std::max(v, excess(i));
    m_corr[i] = v * (1 + 8 * kLdUnit);
  }
  std::vector<ld> p(n + 1);
  for (int64_t i = 0; i <= n; ++i) {
    const ld d = i < n ? d_lo[i] : 0;
    const ld c = i > 0 ? c_lo[i - 1] : 0;
    const ld m_prev = i > 0 ? m_corr[i - 1] : m_corr[0];
    const ld m_next = i < n ? m_corr[i + 1] : m_corr[n];
    p[i] = (d + eh * c - ((m_next - m_corr[i]) - eh * (m_corr[i] - m_prev))) / em1;
  }
  // g_i = delta of the lowered curve at x_i = sum_{j>i} p_j (1 - x_i/x_j).
  std::vector<ld> g(n + 1, 0);
  {
    ld s1 = 0, s2 = 0;  // sum_{j>i} p_j and sum_{j>i} p_j e^{-(j-i)h}
    for (int64_t i = n; i >= 0; --i) {
      g[i] = s1 - s2;
      s1 += p[i];
      s2 = (s2 + p[i]) / eh;
    }
  }
  // Cut the top at the first grid point where g <= 0 and move that kink down.
  int64_t first_nonpositive = n + 1;
  for (int64_t i = 0; i <= n; ++i) {
    if (g[i] <= 0) {
      first_nonpositive = i;
      break;
    }
  }
  lower->min_index = lo;
  lower->infinity_mass = 0;
  const int64_t top = first_nonpositive - 1;  // last kink kept
  lower->mass.assign(n + 1, 0);
  if (top >= 0) {
    for (int64_t i = 0; i < top; ++i) lower->mass[i] = p[i];
    // p_top = -x_top s_{top-1} + g_top (derivation in (3a)).
    const ld g_prev = top > 0 ? g[top - 1] : g[top];
    lower->mass[top] = (top > 0 ? (g_prev - g[top]) / em1 : 0) + g[top];
    if (top == 0) {
      // Only the kink at x_0 survives: the curve is max(g, 0) with g linear left of x_0
      // of slope -(total Q-mass); keep P-mass g_0 at eps_0 (dominated: all P-mass of
      // the crossing kink moved down to eps_0).
      lower->mass[0] = std::max<ld>(g[0], 0);
    }
    RemoveNegativeKinks(h, &lower->mass);
  }
}

// Largest |loss| of a grid point at which the chain below works with e^{loss} itself: far
// inside the exponent range of the type exp returns (long double; double under Emscripten).
#if defined(__EMSCRIPTEN__)
constexpr ld kChainLossLimit = 700;
#else
constexpr ld kChainLossLimit = 11000;
#endif

// The mass-preserving chain optimistic PMF of (3b) on the grid points lo, ..., lo + n.
void ChainLowerPmf(int64_t lo, double h, const std::vector<ld>& d_up,
                   const std::vector<ld>& c_lo, const std::vector<ld>& d_lo, Pmf* lower) {
  const int64_t n = static_cast<int64_t>(c_lo.size());
  const ld em1 = std::expm1(static_cast<ld>(h));
  // Optimistic masses: the mass-preserving chain of (3b). Cell i's atom (ratio point
  // xs_i = x_i + a_i, Q-mass B_i, a_i + b_i = x_{i+1} - x_i) sends Q-mass e_i to x_i and
  // r_i to x_{i+1}; G is the gap delta_atoms - g at the grid points, tracked as a
  // certified interval [g_lo, g_hi]. Every rounding below is directed so that the chosen
  // e_i, r_i satisfy e_i a_i <= G_i for the exact a_i, G_i.
  const ld u = kLdUnit;
  // The chain is homogeneous: with every x scaled by s (x_i = s e^{eps_i}), Q-masses become
  // Q/s and P-masses (c, d, G, D, the output x q) do not change. It works with s = e^{-ref h}
  // where the window reaches losses whose e^{eps} leave the exponent range (a composed
  // window: the first stage of (6) with T1 = 3162 steps of sigma = 0.3 sits near loss
  // 17600, where e^{eps} overflows, the chain's masses were NaN and the lower bound 0), and
  // with ref = 0 otherwise (bit for bit the plain chain).
  const int64_t ref =
      std::max(std::fabs(static_cast<ld>(lo) * h), std::fabs(static_cast<ld>(lo + n) * h)) >
              kChainLossLimit
          ? lo + n / 2
          : 0;
  std::vector<ld> q(n + 1, 0);        // Q-mass at grid point i (rounded down)
  std::vector<ld> gap_hi(n + 1, 0);   // upper bound on G at grid point i
  std::vector<ld> b_atom(n, 0);       // e_i + r_i (rounded down)
  std::vector<ld> a_lo(n, 0), dx_lo(n, 0);
  std::vector<ld> x_lo(n + 1, 0);     // lower bound on e^{eps_i}
  {
    ld g_lo = 0, g_hi = 0, r_prev = 0;
    for (int64_t i = 0; i <= n; ++i) {
      const ld z = static_cast<ld>(lo + i - ref) * static_cast<ld>(h);
      // exp of a rounded argument: relative error (|z| + 2) u, doubled for safety.
      const ld rx = (std::fabs(z) + 4) * 2 * u;
      const ld x = std::exp(z);
      x_lo[i] = x * (1 - rx);
      if (i == n) break;
      const ld dx = x * em1;  // x_{i+1} - x_i, relative error rx + 3u
      const ld dx_hi = dx * (1 + rx + 4 * u);
      dx_lo[i] = dx * (1 - rx - 4 * u);
      const ld c = std::max<ld>(c_lo[i], 0), d = std::max<ld>(d_lo[i], 0);
      const ld d_big = std::max<ld>(d_up[i], d);
      ld e = 0, r = 0;
      if (c + d > 0) {
        // frac <= c / (c + d_up) <= the true relative position of the cell's ratio point.
        const ld frac = c > 0 ? c / (c + d_big) * (1 - 4 * u) : 0;
        const ld a_hi = dx_hi * frac * (1 + 2 * u);
        a_lo[i] = dx_lo[i] * frac * (1 - 2 * u);
        const ld b_lo = dx_lo[i] * (1 - frac) * (1 - 3 * u);
        const ld b_hi = dx_hi * (1 - frac) * (1 + 3 * u);
        // Q-mass of the atom: (c + d) / (x_{i+1} - x_i) <= B_i.
        const ld bq = (c + d) / dx_hi * (1 - 2 * u);
        const ld cap = a_hi > 0 ? g_lo / a_hi : bq;
        e = std::min(bq, cap) * (1 - 4 * u);
        r = std::max<ld>((bq - e) * (1 - 2 * u), 0);
        b_atom[i] = (e + r) * (1 - u);
        // G_{i+1} = G_i - e a_i + r b_i.
        const ld s_lo = std::max<ld>(g_lo - e * a_hi - 3 * u * g_lo, 0);
        const ld s_hi = std::max<ld>(g_hi - e * a_lo[i] + 3 * u * g_hi, 0);
        g_lo = (s_lo + r * b_lo) * (1 - 4 * u);
        g_hi = (s_hi + r * b_hi) * (1 + 4 * u);
      }
      q[i] = (r_prev + e) * (1 - 2 * u);
      r_prev = r;
      gap_hi[i + 1] = g_hi;
    }
    q[n] = r_prev * (1 - u);
  }
  // delta of the atoms at x_k (lower bound): D_k = B_k a_k + D_{k+1} + (x_{k+1} - x_k)
  // sum_{i > k} B_i; the top kink k is the largest with D_k >= G_k, and the P-mass there
  // is x_k sum_{j >= k} q_j + (D_k - G_k) (see (3b)).
  int64_t top = 0;
  ld top_extra = 0;
  {
    ld dsum = 0, bsum = 0;  // D_{k+1} and sum_{i > k} B_i
    for (int64_t k = n; k >= 0; --k) {
      if (k < n) {
        dsum = (b_atom[k] * a_lo[k] + dsum + dx_lo[k] * bsum) * (1 - 4 * u);
        bsum = (bsum + b_atom[k]) * (1 - u);
      }
      const ld slack = dsum - gap_hi[k] * (1 + u);
      if (slack >= 0) {
        top = k;
        top_extra = slack * (1 - 2 * u);
        break;
      }
    }
  }
  lower->min_index = lo;
  lower->infinity_mass = 0;
  lower->mass.assign(n + 1, 0);
  ld q_above = 0;  // sum_{j >= top} q_j
  for (int64_t j = n; j >= top; --j) q_above = (q_above + q[j]) * (1 - u);
  for (int64_t j = 0; j < top; ++j) lower->mass[j] = x_lo[j] * q[j] * (1 - 2 * u);
  lower->mass[top] = (x_lo[top] * q_above + top_extra) * (1 - 2 * u);
}

// Combines two optimistic PMFs on the same grid (the chain g1, left, and the tangent
// g2, right; see (3c)): at a grid point k with g1(x_k) >= g2(x_k) and
// p* = sum_{j>=k} p1_j - sum_{j>k} p2_j >= 0, the PMF {p1_j, j < k; p* at k; p2_j, j > k}
// has delta-curve g2 on [x_k, inf) and below g1 on [0, x_k]. k is taken just below the
// highest grid point where g2 is certifiably above g1 (the tail), so the chain's exact
// bottom and the tangent PMF's tail are both kept; without such a point the chain is used.
void CombineLowerPmfs(double h, Pmf g1, const Pmf& g2, Pmf* out) {
  const int64_t m = static_cast<int64_t>(g1.mass.size());
  if (m == 0 || static_cast<int64_t>(g2.mass.size()) != m || g1.min_index != g2.min_index) {
    *out = std::move(g1);
    return;
  }
  const ld u = kLdUnit;
  const ld emh = std::exp(-static_cast<ld>(h));
  const ld one_minus_emh = -std::expm1(-static_cast<ld>(h));
  // curve[i] = sum_{j>i} p_j (1 - e^{-(j-i)h}) and tail[i] = sum_{j>=i} p_j, both sums of
  // non-negative terms: computed with relative error below 4 (m - i + 1) u.
  auto curves = [&](const Pmf& p, std::vector<ld>* curve, std::vector<ld>* tail) {
    curve->assign(m + 1, 0);
    tail->assign(m + 1, 0);
    ld w = 0;  // sum_{j>i} p_j e^{-(j-i-1)h}
    for (int64_t i = m - 1; i >= 0; --i) {
      (*curve)[i] = (*curve)[i + 1] + one_minus_emh * w;
      (*tail)[i] = (*tail)[i + 1] + std::max<ld>(p.mass[i], 0);
      w = std::max<ld>(p.mass[i], 0) + emh * w;
    }
  };
  std::vector<ld> c1, t1, c2, t2;
  curves(g1, &c1, &t1);
  curves(g2, &c2, &t2);
  auto rel = [&](int64_t i) { return 4 * static_cast<ld>(m - i + 2) * u; };
  int64_t better = -1;  // highest grid point where g2 > g1 for sure
  for (int64_t i = m - 1; i >= 0; --i) {
    if (c2[i] * (1 - rel(i)) > c1[i] * (1 + rel(i))) {
      better = i;
      break;
    }
  }
  const ld infinity_mass = std::min(g1.infinity_mass, g2.infinity_mass);
  *out = std::move(g1);
  if (better < 0) return;
  for (int64_t k = better - 1; k >= 0; --k) {
    if (!(c1[k] * (1 - rel(k)) >= c2[k] * (1 + rel(k)))) continue;
    const ld p_star = (t1[k] * (1 - rel(k)) - t2[k + 1] * (1 + rel(k + 1))) * (1 - 2 * u);
    if (!(p_star >= 0)) continue;
    for (int64_t j = k; j < m; ++j) out->mass[j] = j == k ? p_star : g2.mass[j];
    out->infinity_mass = infinity_mass;
    return;
  }
}

// The pessimistic (connect-the-dots, (2)) and optimistic (combined, (3c)) PMFs on
// the grid points lo, ..., lo + n (spacing h) of a measure given by its cell moments: for
// cell i = (eps_{lo+i}, eps_{lo+i+1}] with P-mass A_i and Q-mass B_i,
// c_i = A_i - x_i B_i and d_i = x_{i+1} B_i - A_i (x_i = e^{eps_{lo+i}}), known within
// [c_lo, c_up] and [d_lo, d_up]. below_mass (P-mass at or below eps_lo) is moved up to
// eps_lo and above_mass (P-mass above the top) goes to +inf in the pessimistic PMF; the
// optimistic PMF leaves both out. Used for the components (BuildContinuousPmfs) and for
// re-discretising a composition onto a coarser grid (Rediscretize). lower_alt, if given,
// receives the tangent-corrected optimistic PMF (3a) alone.
void CellsToPmfs(int64_t lo, double h, const std::vector<ld>& c_up, const std::vector<ld>& d_up,
                 const std::vector<ld>& c_lo, const std::vector<ld>& d_lo, ld below_mass,
                 ld above_mass, Pmf* upper, Pmf* lower, Pmf* lower_alt = nullptr) {
  const int64_t n = static_cast<int64_t>(c_up.size());
  const ld eh = std::exp(static_cast<ld>(h));
  const ld em1 = std::expm1(static_cast<ld>(h));
  // Pessimistic connect-the-dots masses: P-mass at eps_i = (d_i + e^h c_{i-1})/(e^h-1).
  upper->min_index = lo;
  upper->mass.assign(n + 1, 0);
  for (int64_t i = 0; i <= n; ++i) {
    const ld d = i < n ? d_up[i] : 0;
    const ld c = i > 0 ? c_up[i - 1] : 0;
    upper->mass[i] = (d + eh * c) / em1 * (1 + 8 * kLdUnit);
  }
  upper->mass[0] += below_mass;  // mass <= eps_0 moves up
  upper->infinity_mass = above_mass;

  Pmf tangent, chain;
  TangentLowerPmf(lo, h, c_up, d_up, c_lo, d_lo, &tangent);
  ChainLowerPmf(lo, h, d_up, c_lo, d_lo, &chain);
  CombineLowerPmfs(h, std::move(chain), tangent, lower);
  if (lower_alt != nullptr) *lower_alt = std::move(tangent);
}

// Relative uncertainty of a cell moment above which BuildContinuousPmfs also encloses it
// by quadrature (2b), for a component used `steps` times: a relative error r of every
// cell compounds to about steps * r in delta, kept below 1e-4 (the refinement aims at
// gaps of 1e-3 in epsilon, and epsilon moves by 1e-4 / (eps dlog(delta)/deps) <= 1e-4
// for delta <= 1e-3); at most 1e-8, at least 1e-12.
// Under Emscripten (see kLdUnit) the tail differences are ~2000x less precise, and the
// browser's numbers should agree with the command line's to 1e-6: there 1e-6 / steps.
#if defined(__EMSCRIPTEN__)
constexpr ld kQuadratureBudget = 1e-6L;
#else
constexpr ld kQuadratureBudget = 1e-4L;
#endif
ld QuadratureTrigger(double steps) {
  return std::clamp<ld>(kQuadratureBudget / std::max(steps, 1.0), 1e-12L, 1e-8L);
}

// Marks an automatically chosen grid range in BuildContinuousPmfs.
constexpr int64_t kAutoIndex = std::numeric_limits<int64_t>::min();

// Builds the pessimistic and optimistic PMFs of a Gaussian/Laplace/discrete Gaussian
// (sub)sampled component in one direction. `tail` bounds the P-mass left outside the grid
// range. `dg`: the discrete Gaussian's tail table (that base only). The lattice base's
// atoms are handled like any other law: a cell's P- and Q-masses are differences of
// tails, and the tails' stated error bounds enter the cell errors eA, eB below.
// `custom`: tails of a law given by its own function instead (BuildSampledCompositionPmfs).
// lo_fixed / hi_fixed: the grid range of the cells (lo_fixed h, hi_fixed h] instead of the
// automatic one; the law's mass outside it is then left out of the optimistic PMF (a
// sub-measure, see (7)).
Result<void> BuildContinuousPmfs(const Mechanism& m, Direction dir, double h, ld tail,
                                 Pmf* upper, Pmf* lower,
                                 const DiscreteGaussianTails* dg = nullptr,
                                 const std::function<LossTails(ld)>* custom = nullptr,
                                 Pmf* lower_alt = nullptr, int64_t lo_fixed = kAutoIndex,
                                 int64_t hi_fixed = kAutoIndex, double steps = 1) {
  auto tails = [&](int64_t k) {
    const ld l = static_cast<ld>(k) * h;
    return custom != nullptr ? (*custom)(l) : LossTailsAt(m, dir, l, dg);
  };
  // Lowest index: P(L <= lo h) <= tail (or 0 for losses bounded below).
  // Losses are kept within [-kMaxLoss, kMaxLoss] so that e^{loss} never overflows a long
  // double (LossTailsAt and the cell weights below take e^{loss}). Mass beyond the range
  // stays certified: the pessimistic PMF puts the P-mass above the top at +inf and the
  // P-mass below the bottom at the bottom point (both only raise delta(eps)); the
  // optimistic PMF leaves both out (only lowers it).
  const int64_t cap = static_cast<int64_t>(std::ceil(kMaxLoss / h));
  int64_t lo = -1;
  while (lo_fixed == kAutoIndex && lo > -cap && tails(lo).fp > tail) {
    if (lo < -kMaxGridPoints) return Error{GridLimitError(-lo, kMaxGridPoints, h)};
    lo *= 2;
  }
  lo = std::max(lo, -cap);
  {
    int64_t a = lo, b = 0;  // fp(a) <= tail; shrink towards the largest such index
    if (tails(0).fp <= tail) a = 0;
    while (b - a > 1 && a != 0) {
      const int64_t mid = a + (b - a) / 2;
      if (tails(mid).fp <= tail) a = mid; else b = mid;
    }
    lo = a;
  }
  if (lo_fixed != kAutoIndex) lo = lo_fixed;
  int64_t hi = 1;
  while (hi_fixed == kAutoIndex && hi < cap && tails(hi).sp > tail) {
    if (hi > kMaxGridPoints) return Error{GridLimitError(hi, kMaxGridPoints, h)};
    hi *= 2;
  }
  hi = std::min(hi, cap);
  {
    int64_t a = 0, b = hi;  // sp(b) <= tail; shrink towards the smallest such index
    if (tails(0).sp <= tail) b = 0;
    while (b - a > 1 && b != 0) {
      const int64_t mid = a + (b - a) / 2;
      if (tails(mid).sp <= tail) b = mid; else a = mid;
    }
    hi = b;
  }
  if (hi_fixed != kAutoIndex) {
    hi = hi_fixed;
    if (hi <= lo) hi = lo + 1;
  } else {
    if (hi <= lo) hi = lo + 1;
    hi += 2;  // two empty cells on top keep the optimistic top handling away from mass
  }
  const int64_t n = hi - lo;  // cells 0..n-1, grid points 0..n
  if (n > kMaxGridPoints) return Error{GridLimitError(n, kMaxGridPoints, h)};
  std::vector<LossTails> t(n + 1);
  for (int64_t i = 0; i <= n; ++i) t[i] = tails(lo + i);

  const ld eh = std::exp(static_cast<ld>(h));
  std::vector<ld> c_up(n), d_up(n), c_lo(n), d_lo(n);
  const bool quadrature = custom == nullptr && dg == nullptr && m.base == Base::kGaussian;
  const ld trigger = QuadratureTrigger(steps);
  // A cell whose moments' uncertainty moves less P-mass than a hundredth of the tail
  // budget spread over all cells is left as it is.
  const ld negligible = 0.01L * tail / static_cast<ld>(n) * std::expm1(static_cast<ld>(h));
  ld xi = 1;
  for (int64_t i = 0; i < n; ++i) {
    // Cell (eps_i, eps_{i+1}]: P-mass A, Q-mass B from the smaller tail of each pair.
    ld A, eA, B, eB;
    if (t[i].sp <= 0.5L) {
      A = t[i].sp - t[i + 1].sp;
      eA = kCdfUlps * kLdUnit * (t[i].sp + t[i + 1].sp);
    } else {
      A = t[i + 1].fp - t[i].fp;
      eA = kCdfUlps * kLdUnit * (t[i].fp + t[i + 1].fp);
    }
    if (t[i].sq <= 0.5L) {
      B = t[i].sq - t[i + 1].sq;
      eB = kCdfUlps * kLdUnit * (t[i].sq + t[i + 1].sq);
    } else {
      B = t[i + 1].fq - t[i].fq;
      eB = kCdfUlps * kLdUnit * (t[i].fq + t[i + 1].fq);
    }
    if (t[i].atoms == t[i + 1].atoms) {
      // Lattice base, no atom between the two thresholds: the cell is exactly empty (both
      // tails are the same computed numbers, so A = B = 0 as well).
      eA = eB = 0;
    } else {
      eA += t[i].p_err + t[i + 1].p_err;
      eB += t[i].q_err + t[i + 1].q_err;
    }
    // x_i = e^{eps_i}, recomputed exactly every 64 cells and multiplied by e^h between.
    if (i % 64 == 0) xi = std::exp(static_cast<ld>(lo + i) * h); else xi *= eh;
    // c = A - x_i B = x_i (e^{-eps_i} A - B) >= 0, d = x_{i+1} B - A >= 0 (P-mass that
    // connect-the-dots moves to the upper end is c e^h / (e^h - 1)).
    const ld c = A - xi * B;
    const ld d = xi * eh * B - A;
    const ld ec = eA + xi * eB + 256 * kLdUnit * (std::fabs(A) + xi * std::fabs(B));
    const ld ed = eA + xi * eh * eB + 256 * kLdUnit * (std::fabs(A) + xi * eh * std::fabs(B));
    c_up[i] = std::max<ld>(c, 0) + ec;
    d_up[i] = std::max<ld>(d, 0) + ed;
    c_lo[i] = std::max<ld>(c - ec, 0);
    d_lo[i] = std::max<ld>(d - ed, 0);
    // Where the tail differences leave the moments uncertain, the quadrature enclosures
    // of (2b) (Gaussian base): both enclosures are certified, so is their intersection.
    if (quadrature && ec + ed > negligible &&
        (ec > trigger * std::fabs(c) || ed > trigger * std::fabs(d))) {
      CellMoments mq;
      const ld la = static_cast<ld>(lo + i) * h, lb = static_cast<ld>(lo + i + 1) * h;
      if (GaussianLossCellMoments(m, dir, la, t[i], lb, t[i + 1], trigger, &mq)) {
        c_up[i] = std::min(c_up[i], std::max<ld>(mq.c, 0) + mq.c_err);
        d_up[i] = std::min(d_up[i], std::max<ld>(mq.d, 0) + mq.d_err);
        c_lo[i] = std::max(c_lo[i], std::max<ld>(mq.c - mq.c_err, 0));
        d_lo[i] = std::max(d_lo[i], std::max<ld>(mq.d - mq.d_err, 0));
      }
    }
  }
  // With a fixed end, the law's mass beyond it belongs to another part (see (7)) and is
  // left out of both PMFs.
  const ld below_mass =
      lo_fixed != kAutoIndex ? 0 : t[0].fp * (1 + kCdfUlps * kLdUnit) + t[0].p_err;
  const ld above_mass = hi_fixed != kAutoIndex
                            ? 0
                            : t[n].sp * (1 + kCdfUlps * kLdUnit) + t[n].p_err + 8 * LDBL_MIN;
  CellsToPmfs(lo, h, c_up, d_up, c_lo, d_lo, below_mass,  // mass <= eps_0 moves up
              above_mass, upper, lower, lower_alt);
  return OkResult();
}

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
                                     Pmf* lower) {
  struct Atom {
    ld pos, p, q;
  };
  std::vector<Atom> a;
  a.reserve(atoms.size());
  for (const auto& [loss, mass] : atoms) {
    if (!(mass > 0) || !(std::fabs(loss) < kMaxLoss)) continue;
    ld l = loss;
    const ld rho = 2 * (std::fabs(l) + 8) * kLdUnit;
    const int64_t i = static_cast<int64_t>(std::floor(l / h));
    for (int64_t c : {i + 1, i, i - 1}) {
      const ld grid = static_cast<ld>(c) * h;
      if (grid >= l - 2 * rho && grid < l) {
        l = grid;
        break;
      }
    }
    // exp(-l) to (|l| + 2) ulps, the product 1: rho covers both, so q >= p e^{-l}, and
    // q <= p e^{-l} (1 + 2 rho): log(p/q) in [l - 2 rho, l].
    a.push_back({l, mass, mass * std::exp(-l) * (1 + rho)});
  }
  if (a.size() < 2) return OkResult();
  std::sort(a.begin(), a.end(), [](const Atom& x, const Atom& y) { return x.pos < y.pos; });
  const size_t n = a.size();
  std::vector<ld> pos(n), pre_p(n + 1, 0), pre_q(n + 1, 0), suf_p(n + 1, 0), suf_q(n + 1, 0);
  for (size_t k = 0; k < n; ++k) pos[k] = a[k].pos;
  // Neumaier summation: the running compensation keeps the error at a few ulps.
  auto sums = [&](bool forward, std::vector<ld>* out_p, std::vector<ld>* out_q) {
    ld sp = 0, cp = 0, sq = 0, cq = 0;
    for (size_t step = 0; step < n; ++step) {
      const size_t k = forward ? step : n - 1 - step;
      for (auto [s, c, v] : {std::tie(sp, cp, a[k].p), std::tie(sq, cq, a[k].q)}) {
        const ld t = s + v;
        c += std::fabs(s) >= std::fabs(v) ? (s - t) + v : (v - t) + s;
        s = t;
      }
      (*out_p)[forward ? k + 1 : k] = sp + cp;
      (*out_q)[forward ? k + 1 : k] = sq + cq;
    }
  };
  sums(true, &pre_p, &pre_q);
  sums(false, &suf_p, &suf_q);
  const std::function<LossTails(ld)> custom = [&](ld l) {
    const size_t k = static_cast<size_t>(std::upper_bound(pos.begin(), pos.end(), l) - pos.begin());
    LossTails t{suf_p[k], pre_p[k], suf_q[k], pre_q[k]};
    t.atoms = static_cast<ld>(k);  // equal keys: no atom between the two thresholds
    return t;
  };
  Pmf unused;
  return BuildContinuousPmfs(m, dir, h, tail, &unused, lower, nullptr, &custom);
}

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
                             Direction dir, double h, ld tail, ld infinity, Pmf* lower) {
  std::sort(atoms.begin(), atoms.end());
  size_t dense_end = 0;  // atoms [0, dense_end) form the bulk
  for (size_t k = 1; k < atoms.size(); ++k) {
    if (atoms[k].first - atoms[k - 1].first < h / 2) dense_end = k + 1;
  }
  Pmf dense;
  if (dense_end >= 2) {
    DPKIT_RETURN_IF_ERROR(BuildDenseAtomsLowerPmf(
        std::vector<std::pair<ld, ld>>(atoms.begin(), atoms.begin() + dense_end), m, dir, h,
        tail, &dense));
    atoms.erase(atoms.begin(), atoms.begin() + dense_end);
  }
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  if (!dense.mass.empty()) {
    lo = dense.min_index;
    hi = dense.min_index + static_cast<int64_t>(dense.mass.size()) - 1;
  }
  std::vector<std::pair<int64_t, ld>> placed;
  for (const auto& [l, mass] : atoms) {
    if (!(mass > 0) || !(std::fabs(l) <= kMaxLoss)) continue;
    int64_t a = static_cast<int64_t>(std::floor(l / h));
    while (static_cast<ld>(a) * h > l) --a;
    placed.push_back({a, mass});
    lo = std::min(lo, a);
    hi = std::max(hi, a);
  }
  if (placed.empty() && dense.mass.empty()) lo = hi = 0;
  if (hi - lo + 1 > kMaxGridPoints) return Error{GridLimitError(hi - lo + 1, kMaxGridPoints, h)};
  lower->min_index = lo;
  lower->mass.assign(hi - lo + 1, 0);
  lower->infinity_mass = infinity;
  for (const auto& [a, mass] : placed) lower->mass[a - lo] += mass;
  for (size_t i = 0; i < dense.mass.size(); ++i) {
    lower->mass[dense.min_index + static_cast<int64_t>(i) - lo] += std::max<ld>(dense.mass[i], 0);
  }
  return OkResult();
}

// Optimistic PMF of a discrete Gaussian component whose loss atoms are sparse on the grid
// (lattice spacing D/s^2 >= h): the atoms are enumerated, each P-mass rounded down and each
// loss lowered by its rounding bound eta (so below the exact loss), and placed by
// PlaceLowerAtoms (the tangent method where Poisson sampling makes them dense, rounded down
// where isolated). The tangent correction of BuildContinuousPmfs on the lattice's tails would
// drop isolated atoms (see PlaceLowerAtoms). Atoms with P-mass below `tail` (they carry no
// more than the grid's tail budget) are dropped.
Result<void> BuildLatticeLowerPmf(const Mechanism& m, const DiscreteGaussianTails& dg,
                                  Direction dir, double h, ld tail, Pmf* lower) {
  const ld sigma = m.parameter, d = static_cast<ld>(m.sensitivity), q = m.sampling_rate;
  std::vector<std::pair<ld, ld>> atoms;
  // |x| beyond 40 s (+ D) has P-mass below e^{-800}: nothing that is not dropped anyway.
  const ld reach = std::ceil(40 * sigma) + 1;
  for (ld x = -reach; x <= reach + d; ++x) {
    const ld a = dg.PmfLower(x), b = dg.PmfLower(x - d);  // A(x), B(x)
    const ld ell = (x - d / 2) * d / (sigma * sigma);
    ld loss, p_mass, eta;
    if (q == 1) {
      loss = dir == Direction::kRemove ? ell : -ell;
      p_mass = dir == Direction::kRemove ? b : a;
      eta = 8 * kLdUnit * std::fabs(ell);
    } else {
      // Zhu, Dong, Wang 2022, Sec. 5 (as LossTailsAt): L = +-log(1 - q + q e^ell).
      const ld s = std::log1p(q * std::expm1(ell));
      loss = dir == Direction::kRemove ? s : -s;
      p_mass = dir == Direction::kRemove ? (1 - q) * a + q * b : a;
      eta = 16 * kLdUnit * (std::fabs(s) + std::fabs(ell) + 1 + q / (1 - q));
    }
    p_mass *= 1 - 8 * kLdUnit;
    if (!(p_mass >= tail) || !(std::fabs(loss) <= kMaxLoss)) continue;
    atoms.push_back({loss - eta, p_mass});
  }
  return PlaceLowerAtoms(std::move(atoms), m, dir, h, tail, 0, lower);
}

// Randomized response, the worst case of every (eps, delta)-DP mechanism (Kairouz, Oh,
// Viswanath 2015, Thm. 2.1): delta at +inf, (1-delta) e^eps/(1+e^eps) at eps and
// (1-delta)/(1+e^eps) at -eps. Points between grid values are split by connect-the-dots
// (pessimistic) or rounded down (optimistic).
void BuildRandomizedResponsePmfs(const Mechanism& m, double h, Pmf* upper, Pmf* lower) {
  const ld eps = m.parameter, delta = m.rr_delta;
  const ld w_hi = (1 - delta) / (1 + std::exp(-eps));
  const ld w_lo = (1 - delta) / (1 + std::exp(eps));
  const int64_t lo = static_cast<int64_t>(std::floor(-eps / h)) - 1;
  const int64_t hi = static_cast<int64_t>(std::ceil(eps / h)) + 1;
  upper->min_index = lower->min_index = lo;
  upper->mass.assign(hi - lo + 1, 0);
  lower->mass.assign(hi - lo + 1, 0);
  upper->infinity_mass = delta * (1 + 4 * kLdUnit);
  lower->infinity_mass = delta * (1 - 4 * kLdUnit);
  for (const auto& [l, w] : {std::pair<ld, ld>{eps, w_hi}, std::pair<ld, ld>{-eps, w_lo}}) {
    const int64_t a = static_cast<int64_t>(std::floor(l / h));
    const ld la = static_cast<ld>(a) * h;
    const ld frac = l - la;
    // Weight to the upper end b = a + 1: (e^{-a} - e^{-l}) / (e^{-a} - e^{-b}).
    const ld wb = frac <= 0 ? 0 : -std::expm1(-frac) / -std::expm1(-static_cast<ld>(h));
    upper->mass[a - lo] += w * (1 - wb) * (1 + 8 * kLdUnit);
    upper->mass[a + 1 - lo] += w * wb * (1 + 8 * kLdUnit) + 4 * LDBL_MIN;
    lower->mass[a - lo] += w * (1 - 8 * kLdUnit);
  }
}

void FillLogs(Pmf* pmf) {
  pmf->log_mass.resize(pmf->mass.size());
  for (size_t i = 0; i < pmf->mass.size(); ++i) {
    pmf->log_mass[i] = pmf->mass[i] > 0 ? std::log(pmf->mass[i])
                                        : -std::numeric_limits<ld>::infinity();
  }
}

struct ComponentPmfs {
  Pmf upper, lower;
  // The tangent-corrected optimistic PMF alone ((3a); empty where the component has no
  // cells): CertifiedBoundsOnGrid also tries it where the combined one leaves a wide gap.
  Pmf lower_alt;
  double count;
};

// log M(t) = log sum_i p_i e^{t eps_i} (finite part). The terms are summed in long
// double from double exponentials (relative error a few ulps, covered by the callers'
// safety factors).
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
  return mx + std::log(s) + 1e-13L;  // + rounding allowance (upper bound on log M)
}

// A coarse version of a PMF (blocks of points merged at their mean loss) for cheap
// approximate cumulant evaluations when choosing the tilt and the window.
struct Coarse {
  std::vector<double> loss, log_mass;
};
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

// Approximate cumulant generating function K(t) = sum_c T_c log M_c(t) and its first
// two derivatives, from the coarse PMFs.
struct Cumulants {
  ld k, k1, k2;
};
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

// Smallest N >= n of the form 4 * 2^a 3^b 5^c (kissfft's fast radices).
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

// The composed PMF of one direction and bound on a window, in tilted form, with the
// quantities needed to evaluate certified delta bounds.
struct Composed {
  double h;
  int64_t window_start;   // grid index of the first window entry
  int64_t n;              // window length (= FFT size)
  std::vector<double> tilted;  // c~ at window entries (index = grid index - start)
  ld lambda;              // tilt
  ld log_scale;           // K(lambda): c_j = c~_j exp(K - lambda eps_j)
  ld entry_error;         // bound on |computed c~_j - exact circular c~_j|
  ld tilted_outside;      // bound on the tilted mass outside the window (aliasing)
  ld log_above_bound;     // log of a bound on the untilted mass above the window
  ld infinity_mass;       // composed mass at +inf (upper: rounded up, lower: down)
  // First stage of a two-stage composition, upper PMF only: log of a bound on the
  // untilted mass below the window (else -inf; see (6)).
  ld log_below_bound = -std::numeric_limits<ld>::infinity();
  // Grid indices outside which the composition has no mass: the sums over the components of
  // count times their lowest (highest) index of positive mass. Window entries outside hold
  // only aliasing and rounding noise, and their true (linear) mass is 0: they count as 0 in
  // the upper bound (see (4)).
  int64_t support_lo = std::numeric_limits<int64_t>::min();
  int64_t support_hi = std::numeric_limits<int64_t>::max();
};

// Whether grid index g of a composed window can carry mass (see Composed::support_lo).
bool InSupport(const Composed& c, int64_t g) { return g >= c.support_lo && g <= c.support_hi; }

// Sets c->support_lo/hi from the components, rounded outwards (counts up to 1e15 times
// indices up to 2^31 can exceed a long double's 64-bit mantissa).
void SetSupport(const std::vector<ComponentPmfs>& comps, bool upper_pmf, Composed* c) {
  ld lo = 0, hi = 0;
  for (const ComponentPmfs& comp : comps) {
    const Pmf& pmf = upper_pmf ? comp.upper : comp.lower;
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
  lo -= std::fabs(lo) * 1e-15L + 2;
  hi += std::fabs(hi) * 1e-15L + 2;
  if (lo > -9e18L) c->support_lo = static_cast<int64_t>(std::floor(lo));
  if (hi < 9e18L) c->support_hi = static_cast<int64_t>(std::ceil(hi));
}

// Chernoff bound on the tilted composed mass above `b` (side = +1) or below `b`
// (side = -1), as a log: min over s > 0 of -side s b + K(lambda + side s) - K(lambda).
// The minimising s is located on the coarse cumulants; the bound itself is evaluated
// with exact MGFs at that s and two neighbours (any s gives a valid bound).
ld LogTiltedTail(const std::vector<ComponentPmfs>& comps, bool upper_pmf, double h,
                 ld lambda, ld log_k_lambda, ld b, int side, const std::vector<Coarse>& coarse,
                 const std::vector<double>& counts, bool exact) {
  // The exponent -side s b + K(lambda + side s) is convex in s; its minimiser solves
  // K'(lambda + side s) = b, found by safeguarded Newton steps (the derivative of the slope
  // in s is K'' >= 0) inside a bracket over [1e-3, 1e4] (any s gives a valid bound, so the
  // search only needs to be good, not exact).
  auto value = [&](ld s) {
    return -side * s * b + CoarseCumulants(coarse, counts, lambda + side * s).k - log_k_lambda;
  };
  ld s_max = 1e4L;
  if (side < 0) s_max = std::min<ld>(s_max, lambda + 1e4L);
  ld lo = 1e-3L, hi = s_max;
  {
    const Cumulants at_lo = CoarseCumulants(coarse, counts, lambda + side * lo);
    // Slope at s -> 0 non-negative: the minimum is at s -> 0, only the trivial bound.
    if (side * (at_lo.k1 - b) >= 0) return 0;
  }
  ld best_s;
  if (side * (CoarseCumulants(coarse, counts, lambda + side * hi).k1 - b) <= 0) {
    best_s = hi;
  } else {
    const Cumulants at0 = CoarseCumulants(coarse, counts, lambda);
    ld s = at0.k2 > 0 ? std::fabs(b - at0.k1) / at0.k2 : std::sqrt(lo * hi);
    if (!(s > lo && s < hi)) s = std::sqrt(lo * hi);
    for (int it = 0; it < 40 && hi > lo * (1 + 1e-4L); ++it) {
      const Cumulants c = CoarseCumulants(coarse, counts, lambda + side * s);
      const ld slope = side * (c.k1 - b);
      if (slope < 0) lo = s; else hi = s;
      if (std::fabs(slope) <= 1e-4L * std::sqrt(std::max<ld>(c.k2, 0))) break;
      ld next = c.k2 > 0 ? s - slope / c.k2 : 0;
      if (!(next > lo && next < hi)) next = std::sqrt(lo * hi);
      s = next;
    }
    best_s = std::min(std::max(s, lo), hi);
  }
  const ld best_v = value(best_s);
  if (!(std::isfinite(best_v) && best_v < 0)) return 0;
  if (!exact) return best_v;  // estimate only (coarse cumulants), not a bound
  ld best = 0;  // log(1): the trivial bound
  for (ld f : {0.9L, 1.0L, 1.1L}) {
    const ld s = f * best_s;
    ld k = 0;
    for (const ComponentPmfs& c : comps) {
      const Pmf& pmf = upper_pmf ? c.upper : c.lower;
      k += c.count * LogMgf(pmf, h, lambda + side * s);
    }
    if (std::isfinite(k)) best = std::min(best, -side * s * b + k - log_k_lambda);
  }
  return best;
}

// Tilt for a target: minimises the Chernoff estimate of the target (lambda >= 0) on the
// coarse cumulants. For eps(delta): (K(t) - log delta)/t; for delta(eps): K(t) - t eps.
// Any lambda >= 0 gives certified results; this one makes them tight (see (4)).
ld ChooseTilt(const std::vector<Coarse>& coarse, const std::vector<double>& counts,
              bool target_is_eps, double target) {
  auto objective = [&](ld t) -> ld {
    const Cumulants k = CoarseCumulants(coarse, counts, t);
    if (target_is_eps) return k.k - t * static_cast<ld>(target);
    return (k.k - std::log(static_cast<ld>(target))) / t;
  };
  // Scan geometrically, then golden-section refine around the best.
  ld best_t = 0, best_v = target_is_eps ? objective(0) : std::numeric_limits<ld>::infinity();
  for (ld t = 1e-3L; t <= 1e4L; t *= 1.25L) {
    const ld v = objective(t);
    if (std::isfinite(v) && v < best_v) {
      best_v = v;
      best_t = t;
    }
  }
  // Tilts below 1e-3 where they are better (a composed loss spread of ~1e4 with delta near
  // 0.1 wants ~1e-4: sigma = 0.3, T = 1e7; a tilt 8x too large leaves the untilted bulk
  // below the FFT's error floor, and the lower bound kept 1 % of the mass, epsilon >= 0).
  // Only a strictly better value moves best_t, so larger optima are unchanged.
  if (best_t == 1e-3L) {
    for (ld t = 1e-3L / 1.25L; t >= 1e-7L; t /= 1.25L) {
      const ld v = objective(t);
      if (!(std::isfinite(v) && v < best_v)) break;
      best_v = v;
      best_t = t;
    }
  }
  if (best_t > 0) {
    ld a = best_t / 1.25L, b = best_t * 1.25L;
    for (int it = 0; it < 40; ++it) {
      const ld m1 = a + (b - a) * 0.382L, m2 = a + (b - a) * 0.618L;
      if (objective(m1) < objective(m2)) b = m2; else a = m1;
    }
    best_t = (a + b) / 2;
  }
  return best_t;
}

// A stage of a two-stage composition (see ComposeStaged): a fixed tilt (that of the whole
// composition) and, for the first stage, no target (the window covers the tilted bulk
// only) and an aliasing requirement of its own.
struct StageOptions {
  ld lambda;
  bool bulk_only;
  ld required;           // bulk_only: largest tilted mass allowed outside the window
  ld log_above_allowed;  // bulk_only: log of the largest untilted mass above it
};

// Composes the components (upper or lower PMFs) for a target: either delta at
// `target_eps` (target_is_eps) or eps at `target_delta`. `tolerance` (the requested
// relative accuracy of eps) sets how much aliasing the window may leave: the tilted mass
// outside it is at most 1e-2 tolerance / (1 + lambda spread), which changes delta by a
// relative 1e-2 tolerance or less and so eps by far less than the tolerance. (This
// only affects tightness: the aliasing is bounded and accounted for either way.)
// `fft` keeps its plans (twiddle tables) between calls of the same size.
Result<Composed> Compose(const std::vector<ComponentPmfs>& comps, bool upper_pmf, double h,
                         bool target_is_eps, double target, double tolerance,
                         Eigen::FFT<double>* fft_plans, const StageOptions* stage = nullptr) {
  std::vector<Coarse> coarse;
  std::vector<double> counts;
  ld log_no_inf = 0;
  for (const ComponentPmfs& c : comps) {
    const Pmf& pmf = upper_pmf ? c.upper : c.lower;
    coarse.push_back(Coarsen(pmf, h));
    counts.push_back(c.count);
    log_no_inf += c.count * std::log1p(-std::min<ld>(pmf.infinity_mass, 1));
  }
  const ld lambda = stage != nullptr
                        ? stage->lambda
                        : ChooseTilt(coarse, counts, target_is_eps, target);
  const Cumulants kl = CoarseCumulants(coarse, counts, lambda);
  ld centre = kl.k1;
  ld spread = std::sqrt(kl.k2) + 10 * h;
  // The region above the target must be in the window as well.
  ld target_eps;
  if (stage != nullptr && stage->bulk_only) {
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
    k_exact += c.count * LogMgf(upper_pmf ? c.upper : c.lower, h, lambda);
  }
  if (!std::isfinite(k_exact)) {
    // Empty finite part (e.g. all mass at +inf): nothing to convolve.
    Composed out;
    out.h = h;
    out.window_start = 0;
    out.n = 0;
    out.lambda = 0;
    out.log_scale = -std::numeric_limits<ld>::infinity();
    out.entry_error = 0;
    out.tilted_outside = 0;
    out.log_above_bound = -std::numeric_limits<ld>::infinity();
    out.infinity_mass = upper_pmf ? -std::expm1(log_no_inf) : -std::expm1(log_no_inf);
    return out;
  }
  // Half-width of the window in tilted standard deviations: ~5.5 is enough for a near-
  // Gaussian tilted law at tolerance 1e-4; the Chernoff bounds below decide.
  // Start from the Gaussian estimate of the half-width that meets the aliasing
  // requirement below (z with e^{-z^2/2} = requirement), slightly reduced.
  // Required: aliasing error far below the value (see the comment above Compose). The
  // window is first sized on coarse-cumulant estimates (cheap), then certified with
  // exact MGFs (a larger window is tried if the certified bound misses).
  // delta / e^{K - lambda eps} is about p~(eps) / (lambda (lambda + 1)) (the tilted density
  // at eps times the integral of (1 - e^{-y}) e^{-lambda y}), while the aliasing allowance
  // (DeltaAt) is tau e^{K - lambda eps}: with p~ ~ 1/spread the relative error is about
  // tau lambda (lambda + 1) spread. The first factor is kept as it was for lambda <= 10 (it
  // meets the tolerance there with room to spare); heavily tilted laws (tiny epsilon,
  // e.g. q = 1e-4, sigma = 20, T = 1e4: lambda ~ 3300) need the extra lambda / 10.
  const ld required =
      stage != nullptr && stage->bulk_only
          ? stage->required
          : 1e-2L * tolerance / ((1 + lambda * spread) * std::max<ld>(1, lambda / 10));
  ld width = std::max<ld>(4, 0.95L * std::sqrt(2 * std::log(1 / required)));
  // The window's grid range for a half-width (in spreads).
  auto edges = [&](ld w, int64_t* start, int64_t* need) {
    const ld a = std::min(centre, target_eps) - w * spread - 2 * h;
    const ld b = std::max(centre, target_eps) + w * spread + 2 * h;
    *start = static_cast<int64_t>(std::floor(a / h));
    *need = static_cast<int64_t>(std::ceil(b / h)) - *start + 1;
  };
  // Coarse-cumulant estimate of the tilted mass outside the window (not a bound).
  // First stage: the untilted mass above the window goes to +inf in every one of the m
  // factors (upper) or is dropped (lower), so it must also be small against delta.
  const ld log_above_allowed = stage != nullptr && stage->bulk_only
                                   ? stage->log_above_allowed
                                   : std::numeric_limits<ld>::infinity();
  // Whether the coarse-cumulant estimates (not bounds) of the tails outside the window
  // miss the requirements.
  auto misses = [&](ld w) {
    int64_t start, need;
    edges(w, &start, &need);
    const int64_t n = FftSize(need);
    const ld hi_edge = static_cast<ld>(start + n - 1) * h;
    const ld log_above = LogTiltedTail(comps, upper_pmf, h, lambda, k_exact, hi_edge, +1,
                                       coarse, counts, /*exact=*/false);
    const ld below = std::exp(LogTiltedTail(comps, upper_pmf, h, lambda, k_exact,
                                            static_cast<ld>(start) * h, -1, coarse, counts,
                                            /*exact=*/false));
    return std::exp(log_above) + below > 0.5L * required ||
           k_exact - lambda * hi_edge + log_above > log_above_allowed - 1;
  };
  ld failed_width = 0;  // largest half-width whose estimate missed
  // Small steps first (near-Gaussian laws), then large ones (skewed laws of few
  // compositions, e.g. T = 1 with a small sampling rate, have far heavier upper tails).
  for (int attempt = 0; attempt < 16; ++attempt, width *= attempt < 6 ? 1.07L : 1.5L) {
    const bool last = attempt == 15;
    {
      int64_t start, need;
      edges(width, &start, &need);
      if (need > kMaxWindowPoints) return Error{GridLimitError(need, kMaxWindowPoints, h)};
    }
    if (!last) {
      if (misses(width)) {
        failed_width = std::max(failed_width, width);
        continue;
      }
      // After a large step (skewed laws), bisect back towards the smallest half-width
      // whose estimate meets the requirement: the FFT cost is linear in it.
      if (failed_width > 0 && width > 1.2L * failed_width) {
        ld lo = failed_width, hi = width;
        for (int it = 0; it < 5; ++it) {
          const ld mid = (lo + hi) / 2;
          if (misses(mid)) lo = mid; else hi = mid;
        }
        width = hi;
      }
    }
    int64_t start, need;
    edges(width, &start, &need);
    if (need > kMaxWindowPoints) return Error{GridLimitError(need, kMaxWindowPoints, h)};
    const int64_t n = FftSize(need);
    const ld lo_edge = static_cast<ld>(start) * h;
    const ld hi_edge = static_cast<ld>(start + n - 1) * h;
    const ld log_above = LogTiltedTail(comps, upper_pmf, h, lambda, k_exact, hi_edge, +1,
                                       coarse, counts, /*exact=*/true);
    const ld log_below = LogTiltedTail(comps, upper_pmf, h, lambda, k_exact, lo_edge, -1,
                                       coarse, counts, /*exact=*/true);
    const ld tau = std::exp(log_above) + std::exp(log_below);
    if ((tau > required || k_exact - lambda * hi_edge + log_above > log_above_allowed) &&
        !last) {
      continue;
    }
    // First stage, upper PMF: the untilted mass below the window will be composed further,
    // so it is bounded (Chernoff on the untilted law, exact MGFs: lambda = 0 below) and
    // kept, at the window's first entry (see (6)).
    ld log_below_untilted = -std::numeric_limits<ld>::infinity();
    if (stage != nullptr && stage->bulk_only && upper_pmf) {
      ld k0 = 0;
      for (const ComponentPmfs& c : comps) k0 += c.count * LogMgf(c.upper, h, 0);
      log_below_untilted =
          k0 + LogTiltedTail(comps, upper_pmf, h, 0, k0, lo_edge, -1, coarse, counts,
                             /*exact=*/true);
    }

    // Tilted component arrays, folded modulo n, and their transforms.
    Eigen::FFT<double>& fft = *fft_plans;
    fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
    const int64_t nf = n / 2 + 1;
    std::vector<ld> log_magnitude(nf, 0);    // sum_c T_c log(|X_c| + e_c)
    std::vector<ld> relative_error(nf, 0);   // sum_c T_c e_c / (|X_c| + e_c)
    std::vector<ld> log_abs_log(nf, 0);      // for the pow rounding bound
    std::vector<std::complex<double>> product(nf, std::complex<double>(0, 0));
    std::vector<ld> phase(nf, 0), log_mod(nf, 0);
    // Frequencies whose bound on |product| + error is below e^{-700} are "dead": they
    // are set to 0 and their whole bound (<= e^{-700} each) goes into the error. For
    // T-fold powers this is most of the spectrum, and skipping their atan2/exp/sincos is
    // a large saving. The later components can raise log_magnitude by at most
    // T_c log(||x_c||_1 + e_c) <= T_c 1e-6: ||x_c||_1 <= 1 because the tilted masses are
    // normalised by an upper bound on the MGF, and e_c <= 16 u 26 2^13 < 1e-6 for
    // n <= 2^26.
    constexpr ld kDeadLog = -700;
    std::vector<char> dead(nf, 0);
    ld slack = 0;
    for (const ComponentPmfs& c : comps) slack += c.count * 1e-6L;
    const ld log2n = std::ceil(std::log2(static_cast<ld>(n)));
    for (const ComponentPmfs& c : comps) {
      slack -= c.count * 1e-6L;
      const Pmf& pmf = upper_pmf ? c.upper : c.lower;
      const ld log_m = LogMgf(pmf, h, lambda);
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
      const ld e_f = 16 * kUnit * log2n * std::sqrt(static_cast<ld>(n)) * std::sqrt(norm2) +
                     2 * kUnit * norm1;
      std::vector<std::complex<double>> spec;
      fft.fwd(spec, x);
      for (int64_t k = 0; k < nf; ++k) {
        if (dead[k]) continue;
        // |z| as sqrt(re^2 + im^2): 2 ulps, covered by the 6-ulp term of the pow bound.
        const double mod = std::sqrt(std::norm(spec[k]));
        const double a_mod = mod + static_cast<double>(e_f);
        log_magnitude[k] += c.count * std::log(a_mod);
        if (log_magnitude[k] + slack < kDeadLog) {
          dead[k] = 1;
          continue;
        }
        const double log_m = std::log(std::max(mod, DBL_MIN));
        relative_error[k] += c.count * static_cast<double>(e_f) / a_mod;
        log_abs_log[k] += c.count * (std::fabs(log_m) + 4);
        log_mod[k] += c.count * log_m;
        phase[k] += c.count * std::arg(spec[k]);
      }
    }
    ld err_sum = 0, y_norm2 = 0;
    int64_t dead_count = 0;
    for (int64_t k = 0; k < nf; ++k) {
      const ld weight = (k == 0 || (2 * k == n)) ? 1 : 2;
      if (dead[k]) {
        dead_count += static_cast<int64_t>(weight);
        continue;
      }
      const double mag = std::exp(static_cast<double>(log_mod[k]));
      const double ph = static_cast<double>(std::fmod(phase[k], 2 * static_cast<ld>(M_PI)));
      product[k] = std::polar(mag, ph);
      const double bound = std::exp(static_cast<double>(log_magnitude[k]));
      const ld err = bound * relative_error[k] + 6 * kUnit * log_abs_log[k] * bound +
                     2 * kUnit * mag;
      err_sum += weight * err;
      y_norm2 += weight * mag * mag;
    }
    err_sum += static_cast<ld>(dead_count) * std::exp(kDeadLog);
    std::vector<double> y;
    fft.inv(y, product);
    const ld y_norm = std::sqrt(y_norm2) / std::sqrt(static_cast<ld>(n));
    Composed out;
    out.h = h;
    out.window_start = start;
    out.n = n;
    out.tilted.assign(n, 0.0);
    for (int64_t j = 0; j < n; ++j) {
      int64_t pos = (start + j) % n;
      if (pos < 0) pos += n;
      out.tilted[j] = y[pos];
    }
    out.lambda = lambda;
    out.log_scale = k_exact;
    out.entry_error = err_sum / static_cast<ld>(n) + 16 * kUnit * log2n * y_norm +
                      4 * kUnit * y_norm;
    out.tilted_outside = tau;
    // Untilted mass above the window: e^{K(lambda) - lambda B} * tilted mass above B.
    out.log_above_bound = k_exact - lambda * hi_edge + log_above;
    out.log_below_bound = log_below_untilted;
    out.infinity_mass = -std::expm1(log_no_inf);
    SetSupport(comps, upper_pmf, &out);
    return out;
  }
  return Error{"could not bound the aliasing of the privacy loss window"};
}

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

// Floor of a / b for b > 0.
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Re-discretises a composed window (fine grid c.h) onto the grid of spacing k c.h: the
// pessimistic measure by connect-the-dots, the optimistic one by the tangent method, both
// through CellsToPmfs (see (6) for why each stays certified).
Pmf Rediscretize(const Composed& c, bool upper, int64_t k) {
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
  std::vector<ld> c_up(cells), d_up(cells), c_lo(cells), d_lo(cells);
  for (int64_t i = 0; i < cells; ++i) {
    c_up[i] = cc[i] * (1 + rel);
    d_up[i] = dd[i] * (1 + rel);
    c_lo[i] = cc[i] * (1 - rel);
    d_lo[i] = dd[i] * (1 - rel);
  }
  Pmf up, lo;
  const ld above =
      upper ? (c.infinity_mass + std::exp(c.log_above_bound)) * (1 + 8 * kUnit) : 0;
  CellsToPmfs(first_cell, static_cast<double>(k * h), c_up, d_up, c_lo, d_lo, 0, above, &up,
              &lo);
  if (!upper) lo.infinity_mass = c.infinity_mass * (1 - 8 * kUnit);
  Pmf& out = upper ? up : lo;
  FillLogs(&out);
  return std::move(out);
}

// When one component is composed in two stages: from kStagedSteps steps on (there the
// single fine window costs more than the two small ones), and from kMinStagedSteps steps
// where the optimistic PMF's P-mass deficit eta (the mass its tangent correction removes)
// compounds to T eta > kStagedDeficitPerTolerance * tolerance (deficit_rule: not for the coarse check of the add
// direction, which has no lower bound): the two stages keep the windows small enough for
// the refinement of CertifiedBounds to reach grids on which eta is small (e.g. sigma =
// 0.5, q = 0.01, T = 1e5: lower bound 213.6 -> 221.77, upper 221.91). Below them one FFT
// is cheap and the fine grid's accuracy is kept.
constexpr double kStagedSteps = 262144;
constexpr double kMinStagedSteps = 4096;
// T eta is the relative shortfall of the optimistic delta; epsilon falls short by about
// T eta / (lambda eps), and lambda eps (the saddle point times eps) is ~10 or more in
// practice, so T eta <= 100 tolerance keeps the shortfall near the target gap of
// CertifiedBounds (10 tolerance).
constexpr ld kStagedDeficitPerTolerance = 100;

// Plans a two-stage composition: T1 (steps on the fine grid) and k (grid factor), or
// false where one stage is used (several components, or too few steps).
bool PlanStages(const std::vector<ComponentPmfs>& comps, bool deficit_rule, double tolerance,
                int64_t* t1, int64_t* k) {
  if (comps.size() != 1) return false;
  const double count = comps[0].count;
  if (!(count >= kMinStagedSteps && count <= 9e15 && count == std::floor(count))) return false;
  if (count < kStagedSteps) {
    if (!deficit_rule) return false;
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
      return false;
    }
  }
  *t1 = std::llround(std::sqrt(count));
  *k = static_cast<int64_t>(std::floor(std::sqrt(static_cast<double>(*t1)) / 2));
  return *k >= 2;
}

// Two-stage composition, (6): returns the composed window on the coarse grid (or on the
// fine one, composed in one stage, where the coarse grid would cost accuracy).
Result<Composed> ComposeStaged(const std::vector<ComponentPmfs>& comps, bool upper_pmf,
                               double h, bool target_is_eps, double target, double tolerance,
                               int64_t t1, int64_t k, Eigen::FFT<double>* fft,
                               int64_t* points) {
  const int64_t total = static_cast<int64_t>(comps[0].count);
  const int64_t m = total / t1, r = total - m * t1;
  const Pmf& pmf = upper_pmf ? comps[0].upper : comps[0].lower;
  // The tilt and the eps estimate come from the pessimistic PMF for both bounds: the
  // optimistic one's mass deficit (compounded over T steps) can distort its Chernoff
  // estimates badly (sigma = 0.5, q = 0.01, T = 1e6: lambda 0.0008, "eps" -2e5), and any
  // tilt gives certified results.
  const Pmf& pessimistic = comps[0].upper.mass.empty() ? pmf : comps[0].upper;
  const std::vector<Coarse> coarse = {Coarsen(pessimistic, h)};
  StageOptions stage;
  stage.lambda = ChooseTilt(coarse, {comps[0].count}, target_is_eps, target);
  stage.bulk_only = true;
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
    if (k < 2) return Compose(comps, upper_pmf, h, target_is_eps, target, tolerance, fft);
  }
  // Aliasing allowance: m factors with at most 2^22 window entries each lose at most
  // m 2^22 tau of tilted mass; keep that at 1e-2 tolerance.
  stage.required = std::max<ld>(1e-2L * tolerance / (static_cast<ld>(m) * 4194304.0L), 1e-300L);
  // The untilted mass above a first-stage window is put at +inf (upper) or dropped
  // (lower) in each of the m + 1 factors: keep the total at 1e-4 tolerance delta, with
  // delta estimated by its Chernoff bound e^{K(lambda) - lambda eps} for delta(eps).
  const ld log_delta =
      target_is_eps
          ? CoarseCumulants(coarse, {comps[0].count}, stage.lambda).k -
                stage.lambda * static_cast<ld>(target)
          : std::log(static_cast<ld>(target));
  stage.log_above_allowed =
      log_delta + std::log(1e-4L * tolerance) - std::log(static_cast<ld>(m) + 1);
  std::vector<ComponentPmfs> second;
  for (const int64_t count : {t1, r}) {
    if (count == 0) continue;
    std::vector<ComponentPmfs> first(1);
    (upper_pmf ? first[0].upper : first[0].lower) = pmf;
    first[0].count = static_cast<double>(count);
    auto composed = Compose(first, upper_pmf, h, target_is_eps, target, tolerance, fft, &stage);
    if (!composed.ok()) return Error{composed.error()};
    *points = std::max(*points, composed->n);
    ComponentPmfs c;
    (upper_pmf ? c.upper : c.lower) = Rediscretize(*composed, upper_pmf, k);
    c.count = count == t1 ? static_cast<double>(m) : 1.0;
    second.push_back(std::move(c));
  }
  // The second stage keeps the tilt (the saddle point of the same composition).
  stage.bulk_only = false;
  return Compose(second, upper_pmf, static_cast<double>(k) * h, target_is_eps, target,
                 tolerance, fft, &stage);
}

// Certified delta-curve of a composed PMF: untilted entry masses with every error bound
// added (upper) or subtracted (lower), and suffix sums for O(1) evaluation.
struct DeltaCurve {
  bool upper;
  ld h;
  int64_t start = 0, n = 0;
  // Suffix sums of w_j and of w_j e^{o_j - l_j}, o_j = offset[j] h (see (8) above MakeCurve).
  std::vector<ld> s1, s2;
  std::vector<int64_t> offset;
  int64_t rebases = 0;  // rebasings of a non-zero s2 (each costs a rounding, (8))
  ld infinity_mass = 0, above = 0, log_scale = 0, lambda = 0, tau = 0;
  ld exponent_bound = 0;  // |log_scale| + |lambda| max |l_j| + 1 (exponent rounding, (8))
};

// Relative error allowance of each untilted weight w_j and w_j e^{-l_j} of MakeCurve:
// the scale factors are double exponentials re-anchored every kAnchor entries and carried
// between anchors by products with exp(-lambda h). At an anchor, rounding the exponent
// (|e| < 700) to double costs |e| u <= 700 ulps and exp itself 1 ulp; each of the < kAnchor
// products 1 ulp plus the rounding of lambda h; the long double suffix sums add
// n 2^-64 (n <= 2^22). 1024 ulps covers all of it.
constexpr int64_t kAnchor = 32;
constexpr ld kCurveUlps = 1024;

// (8) Offsets of the second suffix sum. The curve needs e^eps sum_{l_j > eps} w_j e^{-l_j}
//     (DeltaAt). Stored as the plain sum s2 = sum w_j e^{-l_j}, its terms leave the range of
//     long double (e^{-11399} is the smallest subnormal) once l_j exceeds ~11400 (the
//     composed loss of sigma = 1, T = 2.5e4 already does): they round to 0, which lowers
//     e^eps s2 and RAISES s1 - e^eps s2, so the optimistic curve exceeds the true one (sigma
//     = 1, T = 1e5, delta = 1e-5: "lower bound" 51348.59 > exact 51347.68, Balle, Wang 2018,
//     Thm. 8; under Emscripten, whose exp is double's, from l_j ~ 745 on).
//     So s2 is stored relative to an offset o_j = g_j h (g_j an integer grid index):
//       S_j = e^{o_j} s2_j = sum_{k >= j} w_k e^{o_j - l_k},
//       e^eps s2_j = exp((eps - o_j) + log S_j).
//     Walking down from the top, g starts at 0 and is moved to g' = start + j (o' = l_j,
//     S <- S e^{(g' - g) h}) whenever |l_j - o| > kOffsetLoss. Every entry then has
//     |l_j - o_j| <= kOffsetLoss, so its term w_j e^{o_j - l_j} <= w_j e^{kOffsetLoss} and
//     e^{eps - o_j} <= e^{kOffsetLoss} (eps < l_first) stay in range, and a window inside
//     |l| <= kOffsetLoss keeps o = 0: the arithmetic of the plain sum, bit for bit.
//     Only roundings are to be bounded. Beyond those the plain sum allows for (kCurveUlps
//     and 8u of both terms), with u = kLdUnit:
//      - a rebasing multiplies the carried S by exp((g' - g) h), (g - g') h <= kOffsetLoss +
//        h (the entry above was within it): the integer difference is exact, the product with
//        h and exp's argument round by (kOffsetLoss + 1) u, exp and the product by a few u:
//        the terms carried through m rebasings are off by a relative m (kOffsetLoss + 8) 2u
//        at most, m <= `rebases` (rebasings of a zero S round nothing and are not counted);
//      - a term's exponent log(v) + log_scale - lambda l_j - (l_j - o_j) rounds by at most
//        (|log v| + |log_scale| + |lambda l_j| + kOffsetLoss) u, |log v| < 12000 (v is a
//        normal long double; in double, < 745);
//      - (eps - o) + log S, then exp: (|o| + |eps| + 2 |log S| + 8) u;
//      so a relative 2u (rebases (kOffsetLoss + 8) + |o| + |eps| + 2 |log S| +
//      exponent_bound + kOffsetLoss + 12064) of e^eps s2 covers them where o_first != 0;
//      - underflow (absolute): each entry's term (exp, and v times a factor) and each
//        rebasing product round with an absolute error below kTinyNormal (the smallest
//        normal number of the type exp returns): at most (2 n + rebases) kTinyNormal in S,
//        times e^{eps - o} <= e^{kOffsetLoss + 1}. That is below e^{-3100} natively and
//        below e^{-640} under Emscripten (kOffsetLoss = 64 there), negligible against any
//        delta >= 1e-200, but allowed for in both directions everywhere.
//     DeltaAt adds these to (upper) or subtracts them from (lower) the curve.
#if defined(__EMSCRIPTEN__)
constexpr ld kOffsetLoss = 64;
constexpr ld kTinyNormal = DBL_MIN;
#else
constexpr ld kOffsetLoss = 8192;
constexpr ld kTinyNormal = LDBL_MIN;
#endif

DeltaCurve MakeCurve(const Composed& c, bool upper) {
  DeltaCurve d;
  d.upper = upper;
  d.h = c.h;
  d.start = c.window_start;
  d.n = c.n;
  d.infinity_mass = c.infinity_mass;
  d.log_scale = c.log_scale;
  d.lambda = c.lambda;
  d.tau = c.tilted_outside;
  d.above = c.n > 0 ? std::exp(c.log_above_bound) : 0;
  d.s1.assign(c.n + 1, 0);
  d.s2.assign(c.n + 1, 0);
  d.offset.assign(c.n + 1, 0);
  if (c.n > 0) {
    const ld l_max = std::max(std::fabs(static_cast<ld>(c.window_start) * c.h),
                              std::fabs(static_cast<ld>(c.window_start + c.n) * c.h));
    d.exponent_bound = std::fabs(c.log_scale) + std::fabs(c.lambda) * l_max + 1;
  }
  // w_j = v_j exp(log_scale - lambda l_j), w2_j = w_j e^{o - l_j}, l_j = (start + j) h,
  // o = g h the offset of (8).
  // The scale factors are kept in double where their exponent is within +-700 and
  // computed in long double otherwise (then only a few entries far in the tails).
  const double r1 = std::exp(-static_cast<double>(c.lambda * c.h));
  const double r2 = std::exp(-static_cast<double>((c.lambda + 1) * c.h));
  double f1 = 0, f2 = 0;
  bool in_range = false;
  ld s1 = 0, s2 = 0;
  int64_t g = 0;  // offset index of (8)
  for (int64_t j = c.n - 1; j >= 0; --j) {
    const ld l = static_cast<ld>(c.window_start + j) * c.h;
    // (8): move the offset to l_j where l_j - o left [-kOffsetLoss, kOffsetLoss].
    bool rebased = false;
    if (std::fabs(static_cast<ld>(c.window_start + j - g) * c.h) > kOffsetLoss) {
      if (s2 > 0) {
        s2 *= std::exp(static_cast<ld>(c.window_start + j - g) * c.h);
        ++d.rebases;
      }
      g = c.window_start + j;
      rebased = true;
    }
    const ld l_rel = static_cast<ld>(c.window_start + j - g) * c.h;  // l_j - o
    const ld v = !upper ? static_cast<ld>(c.tilted[j]) - c.entry_error
                 : InSupport(c, c.window_start + j) ? static_cast<ld>(c.tilted[j]) + c.entry_error
                                                    : 0;
    // Walking downwards in j the exponents grow by lambda h: f_{j-1} = f_j / r.
    if ((c.n - 1 - j) % kAnchor == 0 || rebased) {
      const ld e1 = c.log_scale - c.lambda * l;
      // Within the next kAnchor entries the exponents grow by at most kAnchor (lambda+1) h.
      const ld drift = kAnchor * (c.lambda + 1) * c.h;
      in_range = std::fabs(e1) + drift < 700 && std::fabs(e1 - l_rel) + drift < 700;
      if (in_range) {
        f1 = std::exp(static_cast<double>(e1));
        f2 = std::exp(static_cast<double>(e1 - l_rel));
      }
    } else if (in_range) {
      f1 /= r1;
      f2 /= r2;
    }
    if (v > 0) {
      if (in_range) {
        s1 += v * f1;
        s2 += v * f2;
      } else {
        const ld lw = std::log(v) + c.log_scale - c.lambda * l;
        s1 += std::exp(lw);
        s2 += std::exp(lw - l_rel);
      }
    }
    d.s1[j] = s1;
    d.s2[j] = s2;
    d.offset[j] = g;
  }
  return d;
}

// Certified delta at eps (upper: every error bound added; lower: subtracted).
ld DeltaAt(const DeltaCurve& c, ld eps) {
  ld sum = 0;
  if (c.n > 0) {
    // First entry with loss > eps.
    int64_t first = static_cast<int64_t>(std::floor(eps / c.h)) + 1 - c.start;
    while (first > 0 && static_cast<ld>(c.start + first - 1) * c.h > eps) --first;
    while (first < c.n && static_cast<ld>(c.start + first) * c.h <= eps) ++first;
    first = std::min<int64_t>(std::max<int64_t>(first, 0), c.n);
    // e^eps s2 = sum_{l_j > eps} w_j e^{eps - l_j} <= s1: computed as exp((eps - o) + log S)
    // with the offset o of (8), because e^eps alone overflows a long double for eps >
    // ~11356 (and 0 * inf is NaN), and s2 itself would underflow.
    const ld offset = static_cast<ld>(c.offset[first]) * c.h;
    const ld log_s2 = c.s2[first] > 0 ? std::log(c.s2[first]) : 0;
    const ld x_s2 = c.s2[first] > 0 ? std::exp((eps - offset) + log_s2) : 0;
    // e^eps s2 <= s1, so both are finite unless the untilted weights themselves overflowed
    // a long double: with a huge tilt (lambda ~ 1e4 for epsilon ~ 1e4, e.g. sigma = 0.005)
    // the error allowance of an entry, entry_error e^{K - lambda l}, can exceed 1e4932.
    // Then only the trivial bounds are certain: delta <= 1 and delta >= 0.
    if (!std::isfinite(c.s1[first]) || !std::isfinite(x_s2)) return c.upper ? 1 : 0;
    sum = c.s1[first] - x_s2;
    // Rounding of the weights (kCurveUlps each) and of this difference: the error is
    // relative to the two terms, not to their (possibly much smaller) difference.
    ld rounding = (kCurveUlps * kUnit + 8 * kLdUnit) * (c.s1[first] + x_s2);
    // (8): the offset's roundings (where it is not 0) and the underflows.
    if (c.offset[first] != 0) {
      rounding += 2 * kLdUnit * x_s2 *
                  (static_cast<ld>(c.rebases) * (kOffsetLoss + 8) + std::fabs(offset) +
                   std::fabs(eps) + 2 * std::fabs(log_s2) + c.exponent_bound + kOffsetLoss +
                   12064);
    }
    rounding += std::exp(std::min<ld>(eps - offset, kOffsetLoss + 1) +
                         std::log(static_cast<ld>(2 * c.n + c.rebases + 2) * kTinyNormal));
    if (c.upper) {
      sum = std::max<ld>(sum + rounding, 0) + c.above;
    } else {
      const ld first_loss = static_cast<ld>(c.start + first) * c.h;
      sum -= rounding;
      // (tau = 0 is skipped: its factor may be +inf, and 0 * inf is NaN.)
      if (c.tau > 0) sum -= c.tau * std::exp(c.log_scale - c.lambda * std::max(first_loss, eps));
      sum = std::max<ld>(sum, 0);
    }
  }
  const ld total = c.infinity_mass + sum;
  return c.upper ? std::min<ld>(total * (1 + 4 * kUnit), 1)
                 : std::min<ld>(total * (1 - 4 * kUnit), 1);
}

// Upper: the smallest eps >= 0 with DeltaAt(eps) <= delta (DeltaAt is non-increasing:
// bisection). Lower: an eps with DeltaAt(eps) > delta, as large as can be found; since
// the true delta is non-increasing and >= the lower curve, the true eps(delta) is at
// least that (any such eps is a valid lower bound). The lower curve is not monotone (its
// aliasing allowance grows towards small losses), so its grid values are scanned
// downwards from `start_hint` (the upper bound of the same direction: above it the lower
// curve is below delta) and the crossing refined inside one cell, where it is monotone.
ld EpsilonFor(const DeltaCurve& c, ld delta, ld start_hint) {
  if (c.upper) {
    if (DeltaAt(c, 0) <= delta) return 0;
    ld hi = std::max<ld>(1, c.n > 0 ? static_cast<ld>(c.start + c.n) * c.h : 1);
    if (DeltaAt(c, hi) > delta) return std::numeric_limits<ld>::infinity();
    ld lo = 0;
    for (int it = 0; it < 200 && hi - lo > 1e-13L * std::max<ld>(1, hi); ++it) {
      const ld mid = (lo + hi) / 2;
      if (DeltaAt(c, mid) <= delta) hi = mid; else lo = mid;
    }
    return hi;
  }
  if (c.infinity_mass > delta) return std::numeric_limits<ld>::infinity();
  // Grid points eps_j = (start + j) h; on [eps_j, eps_{j+1}) the curve is monotone.
  int64_t top = c.n - 1;
  if (std::isfinite(start_hint)) {
    top = std::min<int64_t>(top, static_cast<int64_t>(std::ceil(start_hint / c.h)) + 1 - c.start);
  }
  for (int64_t j = top; j >= 0; --j) {
    const ld a = static_cast<ld>(c.start + j) * c.h;
    if (a < 0) break;
    if (DeltaAt(c, a) > delta) {
      ld lo = a, hi = a + c.h;
      for (int it = 0; it < 64; ++it) {
        const ld mid = (lo + hi) / 2;
        if (DeltaAt(c, mid) > delta) lo = mid; else hi = mid;
      }
      return lo;
    }
  }
  return 0;
}

Result<void> CheckOptions(const PldOptions& options) {
  if (!(options.epsilon_tolerance >= 1e-7 && options.epsilon_tolerance <= 0.1)) {
    return Error{"epsilon_tolerance must be in [1e-7, 0.1], got " +
                 FormatDouble(options.epsilon_tolerance)};
  }
  if (!(options.discretization_interval == 0 ||
        (options.discretization_interval >= 1e-7 && options.discretization_interval <= 1))) {
    return Error{"discretization_interval must be 0 (automatic) or in [1e-7, 1], got " +
                 FormatDouble(options.discretization_interval)};
  }
  return OkResult();
}

// Grid spacing from the tolerance: the connect-the-dots error of a T-fold composition
// grows like T h^2 times the per-step loss variance (second order), so for a relative
// accuracy tol of eps we take h ~ sqrt(tol * eps_scale / (T var)), clamped.
double ChooseInterval(const std::map<Mechanism, double>& flat, const PldOptions& options) {
  if (options.discretization_interval > 0) return options.discretization_interval;
  // Total variance of the losses (rough): per step the loss variance of a q-subsampled
  // Gaussian is about q^2 (e^{1/sigma^2} - 1) (the chi^2 divergence) for small q, and at
  // most about q (1/sigma^2 + 1/(4 sigma^4)) (second moment of the unsampled loss
  // N(1/(2 sigma^2), 1/sigma^2), weighted by q) when e^{1/sigma^2} is large.
  double var = 0, max_step_var = 0;
  for (const auto& [m, count] : flat) {
    double v;
    const double q = m.sampling_rate;
    const double inv2 = 1.0 / (m.parameter * m.parameter);
    switch (m.base) {
      case Base::kGaussian:
        v = std::min(q * q * std::expm1(std::min(inv2, 700.0)), q * (inv2 + inv2 * inv2 / 4));
        break;
      case Base::kDiscreteGaussian: {  // as the Gaussian with noise multiplier sigma/D
        const double d = static_cast<double>(m.sensitivity);
        const double r2 = std::min(d * d * inv2, 1e300);
        v = std::min(q * q * std::expm1(std::min(r2, 700.0)), q * (r2 + r2 * r2 / 4));
        break;
      }
      case Base::kLaplace:  // |loss| <= 1/b
        v = std::min(q * q * std::expm1(std::min(2 * inv2, 700.0)), q * inv2);
        break;
      default:
        v = m.parameter * m.parameter;
    }
    var += count * v;
    max_step_var = std::max(max_step_var, v);
  }
  const double sd = std::sqrt(std::max(var, 1e-12));
  // Empirically (see pld_test.cc), h = 2 tol^{1/2} * sd / sqrt(sum T) keeps the upper
  // bound within about tol on typical DP-SGD settings; CertifiedBounds refines it where
  // the resulting gap shows that it did not (and coarsens it where the grid would exceed
  // the limits).
  double total_count = 0;
  for (const auto& [m, count] : flat) total_count += count;
  double h = 2.0 * std::sqrt(options.epsilon_tolerance) * std::max(sd, 0.05) /
             std::sqrt(std::max(total_count, 1.0));
  // At most 2e-3 in the units of the per-step loss spread (when that exceeds 1): a fixed
  // resolution for few compositions, where the formula above would be coarse.
  const double cap = std::min(1.0, 2e-3 * std::max(1.0, std::sqrt(max_step_var)));
  return std::min(cap, std::max(1e-6, h));
}

struct Prepared {
  double h;
  ld tail;  // P-mass each component may leave outside its grid range
  std::vector<std::pair<Mechanism, double>> flat;
  std::vector<ComponentPmfs> remove, add;  // filled by BuildDirection
  bool symmetric;                          // the add direction equals the remove one
};

// Flattens the event and chooses the grid; the component PMFs are built on demand.
Result<Prepared> Prepare(const Event& event, const PldOptions& options, ld tail_budget) {
  DPKIT_RETURN_IF_ERROR(CheckOptions(options));
  std::map<Mechanism, double> flat;
  DPKIT_RETURN_IF_ERROR(Flatten(event, 1.0, 1.0, &flat));
  double total = 0;
  for (const auto& [m, count] : flat) total += count;
  if (!(total <= 1e15)) return Error{"the event has more than 1e15 compositions"};
  Prepared out;
  out.h = ChooseInterval(flat, options);
  out.flat.assign(flat.begin(), flat.end());
  out.symmetric = true;
  for (const auto& [m, count] : flat) {
    if (m.base != Base::kRandomizedResponse && m.sampling_rate < 1) out.symmetric = false;
  }
  out.tail = std::max<ld>(tail_budget / std::max(total, 1.0), 1e-300L);
  return out;
}

Result<void> BuildSampledCompositionPmfs(const Mechanism& m, Direction dir, double h, ld tail,
                                         Pmf* upper, Pmf* lower);

// Builds the pessimistic and optimistic component PMFs of one direction.
Result<const std::vector<ComponentPmfs>*> BuildDirection(Prepared* p, Direction dir) {
  std::vector<ComponentPmfs>* out = dir == Direction::kRemove ? &p->remove : &p->add;
  if (!out->empty()) return out;
  for (const auto& [m, count] : p->flat) {
    ComponentPmfs c;
    c.count = count;
    if (m.base == Base::kRandomizedResponse) {
      BuildRandomizedResponsePmfs(m, p->h, &c.upper, &c.lower);
    } else if (m.base == Base::kBoundedRange) {
      // eps-BR implies eps-DP (the loss range [t - eps, t] contains 0), so randomized
      // response with eps dominates it (Kairouz, Oh, Viswanath 2015, Thm. 2.1): upper.
      // Randomized response with eps/2 has losses +-eps/2, so it is itself eps-BR: its
      // PLD is dominated by the worst case of the class, a valid lower bound.
      Pmf unused;
      BuildRandomizedResponsePmfs({Base::kRandomizedResponse, m.parameter, 1.0, 0.0}, p->h,
                                  &c.upper, &unused);
      BuildRandomizedResponsePmfs({Base::kRandomizedResponse, m.parameter / 2, 1.0, 0.0}, p->h,
                                  &unused, &c.lower);
    } else if (m.base == Base::kSampledComposition) {
      DPKIT_RETURN_IF_ERROR(
          BuildSampledCompositionPmfs(m, dir, p->h, p->tail, &c.upper, &c.lower));
    } else if (m.base == Base::kDiscreteGaussian) {
      const DiscreteGaussianTails dg(m.parameter);
      DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, p->h, p->tail, &c.upper, &c.lower,
                                                &dg, nullptr, &c.lower_alt));
      // Sparse atoms (D/s^2 >= h; s <= 1e5 bounds the enumeration): the optimistic PMF
      // from the enumerated atoms (see BuildLatticeLowerPmf).
      const double spacing = static_cast<double>(m.sensitivity) / (m.parameter * m.parameter);
      if (spacing >= p->h && m.parameter <= 1e5) {
        DPKIT_RETURN_IF_ERROR(BuildLatticeLowerPmf(m, dg, dir, p->h, p->tail, &c.lower));
        c.lower_alt = Pmf();
      }
    } else {
      DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, p->h, p->tail, &c.upper, &c.lower,
                                                nullptr, nullptr, &c.lower_alt, kAutoIndex,
                                                kAutoIndex, count));
    }
    FillLogs(&c.upper);
    FillLogs(&c.lower);
    // lower_alt's logs are filled only if it is composed (CertifiedBoundsOnGrid).
    out->push_back(std::move(c));
  }
  return out;
}

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

Result<void> BuildSampledCompositionPmfs(const Mechanism& m, Direction dir, double h, ld tail,
                                         Pmf* upper, Pmf* lower) {
  Result<Event> inner = Event::FromJsonString(m.inner);
  if (!inner.ok()) return Error{inner.error()};
  std::map<Mechanism, double> flat;
  DPKIT_RETURN_IF_ERROR(Flatten(*inner, 1.0, 1.0, &flat));
  Prepared in;
  in.h = h;
  in.tail = tail;
  in.flat.assign(flat.begin(), flat.end());
  in.symmetric = true;
  const bool remove = dir == Direction::kRemove;
  auto built = BuildDirection(&in, dir);  // the inner laws of the same direction
  if (!built.ok()) return Error{built.error()};
  const std::vector<ComponentPmfs>& comps = **built;

  // Q-only (remove only) and +inf masses of the composed connect-the-dots pair (union
  // bounds).
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
  q_only = std::min<ld>(1, q_only * (1 + 1e-10L) + LDBL_MIN);
  p_inf = std::min<ld>(1, p_inf * (1 + 1e-10L));

  // Direct convolution, largest supports first (then the work is about the larger support
  // times the number of nonzero masses of the others). Returns the masses on the grid from
  // *min_index and the relative rounding bound.
  std::vector<std::pair<const Pmf*, int64_t>> steps_upper, steps_lower;
  double work = 0, acc_size = 1;
  for (size_t c = 0; c < comps.size(); ++c) {
    const double count = in.flat[c].second;
    if (count > 1e6) {
      return Error{"the pld accountant cannot Poisson-sample a composition of more than 1e6 "
                   "events (use --accountant=rdp)"};
    }
    for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) {
      steps_upper.push_back({&comps[c].upper, 0});
      steps_lower.push_back({&comps[c].lower, 0});
    }
  }
  auto by_size = [](const std::pair<const Pmf*, int64_t>& a,
                    const std::pair<const Pmf*, int64_t>& b) {
    return a.first->mass.size() > b.first->mass.size();
  };
  std::stable_sort(steps_upper.begin(), steps_upper.end(), by_size);
  std::stable_sort(steps_lower.begin(), steps_lower.end(), by_size);
  for (const auto& step : steps_upper) {
    double nonzero = 0;
    for (ld v : step.first->mass) nonzero += v != 0;
    work += nonzero * acc_size;
    acc_size += static_cast<double>(step.first->mass.size()) - 1;
  }
  if (work > kMaxConvolutionWork) {
    // The work scales as 1/h^2: report it as a grid that is too fine.
    const double need = static_cast<double>(kMaxGridPoints) * std::sqrt(work / kMaxConvolutionWork);
    return Error{GridLimitError(static_cast<int64_t>(need), kMaxGridPoints, h)};
  }
  auto convolve = [](const std::vector<std::pair<const Pmf*, int64_t>>& steps, int64_t* min_index,
                     ld* rounding) {
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
  };

  // The subsampled loss of an inner loss (ell for remove, m for add) and the factor of its
  // P-mass (see above).
  const ld q = m.sampling_rate;
  auto outer_loss = [&](ld inner_loss) {
    return remove ? std::log1p(q * std::expm1(inner_loss))
                  : -std::log1p(q * std::expm1(-inner_loss));
  };
  // Rounding bound of outer_loss: the grid value (u |ell|, and |dL/d ell| <= 1), expm1 and
  // the product (3 ulps of y = q expm1, i.e. 3 u |y|/(1+y) <= 3 u max(1, q/(1-q)) in L),
  // log1p (u |L|); doubled.
  auto loss_error = [&](ld inner_loss, ld loss) {
    return 8 * kLdUnit * (std::fabs(loss) + std::fabs(inner_loss) + 1 + q / (1 - q));
  };
  // P-mass factor and the relative bound on its rounding (exp of -ell: (|ell| + 2) ulps).
  auto mass_factor = [&](ld ell) { return remove ? q + (1 - q) * std::exp(-ell) : 1.0L; };
  auto factor_error = [&](ld ell) { return (2 * std::fabs(ell) + 16) * kLdUnit; };
  const ld x_h = -std::expm1(-static_cast<ld>(h));

  // Pessimistic: convolve, transform, place by connect-the-dots.
  {
    int64_t min_index;
    ld rounding;
    std::vector<ld> g = convolve(steps_upper, &min_index, &rounding);
    std::vector<std::pair<ld, ld>> atoms;  // (loss, P-mass), before placement
    ld to_infinity = remove ? q * p_inf : 0;
    for (size_t j = 0; j < g.size(); ++j) {
      if (g[j] <= 0) continue;
      const ld ell = static_cast<ld>(min_index + static_cast<int64_t>(j)) * h;
      const ld mass = g[j] * (1 + 1.01L * rounding) * mass_factor(ell) * (1 + factor_error(ell));
      const ld loss = outer_loss(ell);
      atoms.push_back({loss + loss_error(ell, loss), mass});
    }
    // Remove: the inner Q-only mass (ell = -inf) at log(1-q). Add: the inner +inf mass
    // (m = +inf, where B = 0) at -log(1-q).
    const ld edge = remove ? std::log1p(-q) : -std::log1p(-q);
    atoms.push_back({edge + 8 * kLdUnit * std::fabs(edge),
                     (remove ? (1 - q) * q_only : p_inf) * (1 + 8 * kLdUnit)});
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
    if (hi - lo + 1 > kMaxGridPoints) return Error{GridLimitError(hi - lo + 1, kMaxGridPoints, h)};
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
      upper->mass[a + 1 - lo] += mass * wb * (1 + 8 * kLdUnit) + 4 * LDBL_MIN;
    }
    upper->infinity_mass = std::min<ld>(1, to_infinity * (1 + 8 * kLdUnit));
  }

  // Optimistic: convolve, (remove) drop low mass until the P- and Q-totals are <= 1,
  // transform, round down.
  {
    int64_t min_index;
    ld rounding;
    std::vector<ld> g = convolve(steps_lower, &min_index, &rounding);
    for (ld& v : g) v = std::max<ld>(0, v * (1 - 1.01L * rounding) * (1 - 8 * kLdUnit));
    // The composed +inf mass: some component at +inf, 1 - prod_c (1 - P_c(+inf))^count.
    ld log_finite = 0;
    for (size_t c = 0; c < comps.size(); ++c) {
      log_finite += static_cast<ld>(in.flat[c].second) *
                    std::log1p(-std::min<ld>(comps[c].lower.infinity_mass, 1));
    }
    const ld inf_lower = std::max<ld>(0, -std::expm1(log_finite) * (1 - 1e-10L));
    ld p_mass = inf_lower;
    for (ld v : g) p_mass += v;
    p_mass *= 1 + 1e-12L;
    for (size_t j = 0; j < g.size() && p_mass > 1 && remove; ++j) {
      const ld cut = std::min(g[j], (p_mass - 1) * (1 + 1e-12L));
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
    q_mass *= 1 + 1e-12L;
    // Remove the excess Q-mass from the lowest losses (the P-mass removed there is the
    // excess times e^{ell}, small where ell < 0).
    for (size_t j = 0; j < g.size() && q_mass > 1 && remove; ++j) {
      if (g[j] <= 0) continue;
      const ld ell = static_cast<ld>(min_index + static_cast<int64_t>(j)) * h;
      const ld here = std::exp(std::log(g[j]) - ell);
      const ld excess = (q_mass - 1) * (1 + 1e-12L);
      if (here <= excess) {
        q_mass -= here;
        g[j] = 0;
      } else {
        g[j] = std::max<ld>(0, g[j] - std::exp(std::log(excess) + ell) * (1 + 1e-12L));
        q_mass = 1;
      }
    }
    // (loss, P-mass) of the finite atoms; add: the inner +inf mass lands at -log(1-q).
    std::vector<std::pair<ld, ld>> atoms;
    for (size_t j = 0; j < g.size(); ++j) {
      if (g[j] <= 0) continue;
      const ld ell = static_cast<ld>(min_index + static_cast<int64_t>(j)) * h;
      const ld loss = outer_loss(ell);
      atoms.push_back({loss - loss_error(ell, loss), g[j] * mass_factor(ell) * (1 - factor_error(ell))});
    }
    if (!remove && inf_lower > 0) {
      const ld edge = -std::log1p(-q);
      atoms.push_back({edge - 8 * kLdUnit * std::fabs(edge), inf_lower * (1 - 8 * kLdUnit)});
    }
    return PlaceLowerAtoms(std::move(atoms), m, dir, h, tail,
                           remove ? q * inf_lower * (1 - 8 * kLdUnit) : 0, lower);
  }
  return OkResult();
}

// eps(delta) (target_is_eps false) or delta(eps) of one direction: certified upper
// (upper = true) or lower bound. `hint` is the upper bound of the same direction (lower
// eps search only).
// `points` is raised to the largest grid used (component or window).
Result<ld> DirectionBound(const std::vector<ComponentPmfs>& comps, bool upper, double h,
                          bool target_is_eps, double target, double tolerance, ld hint,
                          Eigen::FFT<double>* fft, int64_t* points, bool deficit_rule = true) {
  // A single use of a single component needs no composition: its PMF is the answer
  // (untilted, exact up to the per-mass rounding that MakeCurve allows for). This avoids
  // the FFT's error allowances, which dominate for one step with a tiny epsilon.
  Result<Composed> composed = Error{""};
  bool deficit_staged = false;  // two stages chosen only by the deficit rule
  if (comps.size() == 1 && comps[0].count == 1) {
    const Pmf& pmf = upper ? comps[0].upper : comps[0].lower;
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
    composed = std::move(single);
  } else if (int64_t t1 = 0, k = 0; PlanStages(comps, deficit_rule, tolerance, &t1, &k)) {
    composed = ComposeStaged(comps, upper, h, target_is_eps, target, tolerance, t1, k, fft,
                             points);
    deficit_staged = comps[0].count < kStagedSteps;
  } else {
    composed = Compose(comps, upper, h, target_is_eps, target, tolerance, fft);
  }
  if (!composed.ok()) return Error{composed.error()};
  *points = std::max(*points, composed->n);
  for (const ComponentPmfs& c : comps) {
    *points = std::max(*points, static_cast<int64_t>((upper ? c.upper : c.lower).mass.size()));
  }
  const DeltaCurve curve = MakeCurve(*composed, upper);
  ld value = target_is_eps ? DeltaAt(curve, target) : EpsilonFor(curve, target, hint);
  // Below kStagedSteps the stages serve the tangent PMF's deficit; the single stage keeps
  // the fine grid's accuracy (e.g. q = 1e-4, sigma = 0.6, T = 1e4: upper 0.27487 in one
  // stage, 0.27628 in two) but can miss a heavy tail's window (then its bound is trivial).
  // Both are certified: the tighter one is kept.
  if (deficit_staged) {
    auto single = Compose(comps, upper, h, target_is_eps, target, tolerance, fft);
    if (single.ok()) {
      *points = std::max(*points, single->n);
      const DeltaCurve c1 = MakeCurve(*single, upper);
      const ld v1 = target_is_eps ? DeltaAt(c1, target) : EpsilonFor(c1, target, hint);
      value = upper ? std::min(value, v1) : std::max(value, v1);
    }
  }
  return value;
}

// Direct convolution of two non-negative PMFs: a on a grid of spacing H, b on a grid of
// spacing r H (its index i is the loss i r H); the result is on the H grid. Each entry is
// a sum of at most b.size() non-negative products, rounded down (lower) or up (upper) by
// an allowance covering that many roundings. Lower: mass at +inf and masses below 1e-150
// are dropped. Upper: they go to +inf, with every product they could take part in.
Result<Pmf> ConvolveDirect(const Pmf& a, const Pmf& b, int64_t r, bool upper = false) {
  Pmf out;
  out.infinity_mass = 0;
  if (upper) {
    ld a_all = a.infinity_mass, b_all = b.infinity_mass;
    ld a_out = a.infinity_mass, b_out = b.infinity_mass;  // +inf or below 1e-150
    for (const ld v : a.mass) {
      a_all += v;
      if (!(v > 1e-150L)) a_out += std::max<ld>(v, 0);
    }
    for (const ld v : b.mass) {
      b_all += v;
      if (!(v > 1e-150L)) b_out += std::max<ld>(v, 0);
    }
    out.infinity_mass = (a_out * b_all + b_out * a_all) * (1 + 8 * kLdUnit);
  }
  if (a.mass.empty() || b.mass.empty()) return out;
  const int64_t na = static_cast<int64_t>(a.mass.size());
  const int64_t nb = static_cast<int64_t>(b.mass.size());
  if (static_cast<ld>(na) * static_cast<ld>(nb) > 4e9L) {
    return Error{"direct convolution too large"};
  }
  out.min_index = a.min_index + r * b.min_index;
  // In double: masses below 1e-150 are dropped (so no product underflows), the rest
  // rounded to double (relative error u each), products and sums of non-negative terms
  // (relative error below (nb + 2) u in all), all covered by the allowance below.
  auto to_double = [](ld v) { return v > 1e-150L ? static_cast<double>(v) : 0.0; };
  std::vector<double> ad(na), sum(na + r * (nb - 1), 0.0);
  for (int64_t i = 0; i < na; ++i) ad[i] = to_double(a.mass[i]);
  for (int64_t j = 0; j < nb; ++j) {
    const double w = to_double(b.mass[j]);
    if (!(w > 0)) continue;
    double* dst = sum.data() + r * j;
    for (int64_t i = 0; i < na; ++i) dst[i] += w * ad[i];
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
Result<ld> DecomposedBound(const Mechanism& m, Direction dir, int64_t total, bool upper,
                           const Pmf& pessimistic, double h_pess, bool target_is_eps,
                           double target, double tolerance, ld hint, ld tail,
                           Eigen::FFT<double>* fft) {
  if (!(m.base == Base::kGaussian || m.base == Base::kLaplace) || total < 16) {
    return Error{"no decomposition"};
  }
  StageOptions stage;
  stage.lambda = ChooseTilt({Coarsen(pessimistic, h_pess)}, {static_cast<double>(total)},
                            target_is_eps, target);
  const int64_t t0 = std::llround(std::sqrt(static_cast<double>(total)));
  const int64_t blocks = total / t0, rest = total - blocks * t0;
  auto above = [&](ld l) { return LossTailsAt(m, dir, l).sp; };  // P(L > l)
  // Loss quantile: the smallest l with P(L > l) <= p (bisection; losses are within
  // [-kMaxLoss, kMaxLoss]).
  auto quantile = [&](ld p) {
    ld lo = -kMaxLoss, hi = kMaxLoss;
    for (int it = 0; it < 200 && hi - lo > 1e-12L * (1 + std::fabs(hi)); ++it) {
      const ld mid = (lo + hi) / 2;
      (above(mid) > p ? lo : hi) = mid;
    }
    return hi;
  };
  const ld tau0 = quantile(0.005L / static_cast<ld>(t0));
  const ld q10 = quantile(0.9L), q90 = quantile(0.1L);
  const ld lower_end = quantile(1 - 1e-9L);
  ld h_f = std::min<ld>(h_pess, (q90 - q10) / 64);
  // At most 2^20 fine cells up to tau.
  h_f = std::max<ld>(h_f, (tau0 - lower_end) / 1048576);
  if (!(h_f > 0) || !std::isfinite(static_cast<double>(h_f))) return Error{"no decomposition"};
  const double hf = static_cast<double>(h_f);
  // First pass: the bulk on the fine grid up to tau, for its spread.
  const int64_t tau_fine = static_cast<int64_t>(std::ceil(tau0 / h_f));
  Pmf unused, bulk;
  Pmf* bulk_up = upper ? &bulk : &unused;
  Pmf* bulk_lo = upper ? &unused : &bulk;
  const double steps = static_cast<double>(total);
  DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, hf, tail, bulk_up, bulk_lo, nullptr,
                                            nullptr, nullptr, kAutoIndex, tau_fine, steps));
  ld mass = 0, mean = 0, second = 0;
  for (size_t i = 0; i < bulk.mass.size(); ++i) {
    const ld l = static_cast<ld>(bulk.min_index + static_cast<int64_t>(i)) * h_f;
    mass += bulk.mass[i];
    mean += bulk.mass[i] * l;
    second += bulk.mass[i] * l * l;
  }
  if (!(mass > 0)) return Error{"no decomposition"};
  mean /= mass;
  const ld spread =
      std::sqrt(std::max<ld>(second / mass - mean * mean, 0) * static_cast<ld>(t0));
  // Block grid: about 32 cells per standard deviation of a block's bulk, no finer than h_f
  // and no coarser than the ordinary grid.
  // The final composition of T / T0 blocks on H adds about (T / T0) H^2 / 4 to the loss
  // variance, the ordinary grid T h^2 / 4: H = h sqrt(T0) / 2 keeps it below that.
  const ld h_block = std::min<ld>(spread / 32, h_pess * std::sqrt(static_cast<ld>(t0)) / 2);
  const int64_t factor =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(h_block / h_f)));
  const double big_h = static_cast<double>(factor) * hf;
  // The tail on its own grid H_G = factor_g H (its density varies on the scale of the loss
  // itself, >= tau): G and its powers are convolved directly there, and with a block's
  // bulk onto H (ConvolveDirect), no FFT.
  const int64_t factor_g = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(std::max<ld>(big_h, tau0 / 32) / big_h)));
  const double tail_h = static_cast<double>(factor_g) * big_h;
  const int64_t tau_tail = static_cast<int64_t>(std::ceil(tau0 / tail_h));
  DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, hf, tail, bulk_up, bulk_lo, nullptr,
                                            nullptr, nullptr, kAutoIndex,
                                            tau_tail * factor_g * factor, steps));
  FillLogs(&bulk);
  Pmf tail_part;
  DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, tail_h, tail,
                                            upper ? &tail_part : &unused,
                                            upper ? &unused : &tail_part, nullptr, nullptr,
                                            nullptr, tau_tail, kAutoIndex, steps));
  if (!upper) tail_part.infinity_mass = 0;
  ld tail_mass = tail_part.infinity_mass, bulk_mass = bulk.infinity_mass;
  for (const ld v : tail_part.mass) tail_mass += v;
  for (const ld v : bulk.mass) bulk_mass += v;
  // Dropped terms: sum_{k > K} C(T0,k) p^k <= (T0 p)^{K+1}/(K+1)! e^{T0 p}, kept below a
  // tenth of the tolerance times delta (estimated by the target or the upper bound).
  const ld lambda_t = static_cast<ld>(t0) * std::max<ld>(tail_mass, 0);
  const ld delta_estimate =
      target_is_eps ? std::max<ld>(hint, 1e-300L) : static_cast<ld>(target);
  const ld wanted = 0.1L * static_cast<ld>(tolerance) * delta_estimate;
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
  ld dropped = 0;
  if (upper && tail_mass > 0) {
    ld term = 1;
    for (int k = 1; k <= kmax + 1; ++k) term *= lambda_t / k;
    dropped = term * std::exp(lambda_t) *
              std::exp(static_cast<ld>(t0) * std::log(std::max<ld>(1, bulk_mass))) *
              (1 + 64 * kLdUnit);
  }
  // Powers of the tail on its grid.
  std::vector<Pmf> tail_power(kmax + 1);
  if (kmax >= 1) tail_power[1] = tail_part;
  for (int k = 2; k <= kmax; ++k) {
    auto next = ConvolveDirect(tail_power[k - 1], tail_part, 1);
    if (!next.ok()) return Error{next.error()};
    tail_power[k] = std::move(*next);
  }
  stage.bulk_only = true;
  stage.required =
      std::max<ld>(1e-2L * tolerance / (static_cast<ld>(blocks + 1) * 4194304.0L), 1e-300L);
  stage.log_above_allowed =
      std::log(1e-4L * tolerance) - std::log(blocks + 2.0L) + std::log(delta_estimate);
  // One block of `steps` steps on the H grid.
  auto block = [&](int64_t steps) -> Result<Pmf> {
    std::map<int64_t, ld> acc;
    ld infinity = upper ? dropped : 0;
    ld binom = 1;  // C(steps, k), rounded down (up) below
    for (int k = 0; k <= kmax && k <= steps; ++k) {
      if (k > 0) binom *= static_cast<ld>(steps - k + 1) / k;
      Pmf part;
      if (steps - k >= 1) {
        std::vector<ComponentPmfs> f(1);
        (upper ? f[0].upper : f[0].lower) = bulk;
        f[0].count = static_cast<double>(steps - k);
        auto composed = Compose(f, upper, hf, target_is_eps, target, tolerance, fft, &stage);
        if (!composed.ok()) return Error{composed.error()};
        part = Rediscretize(*composed, upper, factor);
      } else {
        part.min_index = 0;
        part.mass = {1};
        FillLogs(&part);
      }
      if (k > 0) {
        auto product = ConvolveDirect(part, tail_power[k], factor_g, upper);
        if (!product.ok()) return Error{product.error()};
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
  };
  std::vector<ComponentPmfs> final_comps;
  for (const auto& [steps, count] : {std::pair<int64_t, int64_t>{t0, blocks}, {rest, 1}}) {
    if (steps == 0 || count == 0) continue;
    auto law = block(steps);
    if (!law.ok()) return Error{law.error()};
    if (law->mass.empty()) return Error{"no decomposition"};
    ComponentPmfs c;
    (upper ? c.upper : c.lower) = std::move(*law);
    c.count = static_cast<double>(count);
    final_comps.push_back(std::move(c));
  }
  stage.bulk_only = false;
  auto composed =
      Compose(final_comps, upper, big_h, target_is_eps, target, tolerance, fft, &stage);
  if (!composed.ok()) return Error{composed.error()};
  const DeltaCurve curve = MakeCurve(*composed, upper);
  return target_is_eps ? DeltaAt(curve, target) : EpsilonFor(curve, target, hint);
}

// The decomposed bounds (7) of an event made of one Gaussian or Laplace component used 16
// to 1e12 times, in direction `dir`, on the grid spacing options.discretization_interval
// (the tilt and the block grid follow from it): the lower and/or upper bound asked for
// (the other stays an error). An error where the event does not have that form.
struct DecomposedResults {
  Result<ld> lower = Error{"not asked for"};
  Result<ld> upper = Error{"not asked for"};
};
Result<DecomposedResults> DecomposedBoundsForEvent(const Event& event,
                                                   const PldOptions& options, ld tail_budget,
                                                   Direction dir, bool want_lower,
                                                   bool want_upper, bool target_is_eps,
                                                   double target, ld hint) {
  auto prepared = Prepare(event, options, tail_budget);
  if (!prepared.ok()) return Error{prepared.error()};
  if (prepared->flat.size() != 1) return Error{"one component only"};
  const Mechanism m = prepared->flat[0].first;
  const double count = prepared->flat[0].second;
  if (!(count >= 16 && count <= 1e12 && count == std::floor(count))) {
    return Error{"16 to 1e12 uses only"};
  }
  if (!(m.base == Base::kGaussian || m.base == Base::kLaplace)) {
    return Error{"Gaussian or Laplace components only"};
  }
  auto comps = BuildDirection(&*prepared, dir);
  if (!comps.ok()) return Error{comps.error()};
  Eigen::FFT<double> fft;
  DecomposedResults out;
  for (const bool upper : {false, true}) {
    if (!(upper ? want_upper : want_lower)) continue;
    (upper ? out.upper : out.lower) =
        DecomposedBound(m, dir, static_cast<int64_t>(count), upper, (**comps)[0].upper,
                        prepared->h, target_is_eps, target, options.epsilon_tolerance, hint,
                        prepared->tail, &fft);
  }
  return out;
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
};

// Certified upper and lower bounds on eps(delta) or delta(eps) (both are "larger is less
// private"): the upper bound is the maximum over the two directions, the lower bound
// that of the direction with the larger upper bound. The exact value is at least that
// direction's exact value, which is within its gap of its upper bound, which is within
// the other direction's upper bound: nothing is lost beyond one gap.
// The add direction is first bounded on a coarse grid: when that certified upper bound
// is already at most the remove direction's, the add direction cannot change either
// reported number and its fine composition is skipped (for Poisson-subsampled Gaussians
// the remove direction dominates by far more than the coarse grid's error).
Result<RawBounds> CertifiedBoundsOnGrid(const Event& event, bool target_is_eps,
                                        double target, const PldOptions& options,
                                        ld tail_budget) {
  auto prepared = Prepare(event, options, tail_budget);
  if (!prepared.ok()) return Error{prepared.error()};
  const double tol = options.epsilon_tolerance;
  Eigen::FFT<double> fft;
  RawBounds out{0, 0, prepared->h, 0};
  auto remove = BuildDirection(&*prepared, Direction::kRemove);
  if (!remove.ok()) return Error{remove.error()};
  auto remove_upper = DirectionBound(**remove, true, prepared->h, target_is_eps, target, tol,
                                     0, &fft, &out.points);
  if (!remove_upper.ok()) return Error{remove_upper.error()};
  out.upper = *remove_upper;
  Direction dominant = Direction::kRemove;
  if (!prepared->symmetric) {
    bool add_needed = true;
    if (prepared->h * kCoarseFactor <= 1) {
      PldOptions coarse_options = options;
      coarse_options.discretization_interval = prepared->h * kCoarseFactor;
      auto coarse = Prepare(event, coarse_options, tail_budget);
      if (!coarse.ok()) return Error{coarse.error()};
      auto add = BuildDirection(&*coarse, Direction::kAdd);
      if (!add.ok()) return Error{add.error()};
      auto add_upper =
          DirectionBound(**add, true, coarse->h, target_is_eps, target,
                         std::min(0.1, tol * kCoarseFactor * kCoarseFactor), 0, &fft,
                         &out.points, /*deficit_rule=*/false);
      if (!add_upper.ok()) return Error{add_upper.error()};
      add_needed = !(*add_upper <= out.upper);
      out.other_upper = *add_upper;
    }
    if (add_needed) {
      auto add = BuildDirection(&*prepared, Direction::kAdd);
      if (!add.ok()) return Error{add.error()};
      auto add_upper = DirectionBound(**add, true, prepared->h, target_is_eps, target, tol,
                                      0, &fft, &out.points);
      if (!add_upper.ok()) return Error{add_upper.error()};
      if (*add_upper > out.upper) {
        out.other_upper = out.upper;
        out.upper = *add_upper;
        dominant = Direction::kAdd;
      } else {
        out.other_upper = *add_upper;
      }
    }
  }
  out.dominant = dominant;
  auto& comps = dominant == Direction::kRemove ? prepared->remove : prepared->add;
  auto lower = DirectionBound(comps, false, prepared->h, target_is_eps, target, tol,
                              out.upper, &fft, &out.points);
  if (!lower.ok()) return Error{lower.error()};
  out.lower = *lower;
  // Where the combined optimistic PMFs leave a gap wider than the refinement target, the
  // tangent-corrected ones alone (also certified, (3a)) are tried as well: they keep more
  // of a narrow bulk's tail (e.g. q = 1e-4, sigma = 0.5, T = 1e4). The larger lower bound
  // is kept.
  bool has_alt = false;
  for (const ComponentPmfs& c : comps) has_alt = has_alt || !c.lower_alt.mass.empty();
  if (has_alt && out.upper - out.lower > 10 * static_cast<ld>(tol) * out.upper) {
    for (ComponentPmfs& c : comps) {
      if (c.lower_alt.mass.empty()) continue;
      if (c.lower_alt.log_mass.size() != c.lower_alt.mass.size()) FillLogs(&c.lower_alt);
      std::swap(c.lower, c.lower_alt);
    }
    auto alt = DirectionBound(comps, false, prepared->h, target_is_eps, target, tol, out.upper,
                              &fft, &out.points);
    for (ComponentPmfs& c : comps) {
      if (!c.lower_alt.mass.empty()) std::swap(c.lower, c.lower_alt);
    }
    if (alt.ok()) out.lower = std::max(out.lower, *alt);
  }
  // Where the dominant direction certifies no lower bound at all, the other direction's
  // (also a lower bound on the maximum, (5)) is tried: the two upper bounds can be close
  // (q = 1e-4, sigma = 1, T = 1e7, delta = 1e-15), and the other's lower bound may hold.
  if (!(out.lower > 0) && !prepared->symmetric) {
    const Direction other =
        dominant == Direction::kRemove ? Direction::kAdd : Direction::kRemove;
    auto other_comps = BuildDirection(&*prepared, other);
    if (other_comps.ok()) {
      auto other_lower = DirectionBound(**other_comps, false, prepared->h, target_is_eps,
                                        target, tol, out.upper, &fft, &out.points);
      if (other_lower.ok()) out.lower = std::max(out.lower, *other_lower);
    }
  }
  return out;
}

// Largest number of refinements of an automatically chosen grid, and the largest grid
// (points of a component or of the window) a refinement may reach.
constexpr int kMaxRefinements = 3;
constexpr int64_t kRefinementPoints = int64_t{1} << 20;

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
Result<RawBounds> CertifiedBounds(const Event& event, bool target_is_eps, double target,
                                  const PldOptions& options, ld tail_budget) {
  auto bounds = CertifiedBoundsOnGrid(event, target_is_eps, target, options, tail_budget);
  if (options.discretization_interval > 0) return bounds;
  // The automatic grid for the requested tolerance exceeds the limits (e.g. 1e8 steps
  // with little noise): use a coarser one (both bounds stay certified; the gap shows the
  // lost tightness), up to spacing 1.
  double h = bounds.ok() ? bounds->h : 0;
  for (int round = 0; !bounds.ok() && round < 8; ++round) {
    if (bounds.error().rfind(kGridLimitError, 0) != 0) return bounds;
    if (h == 0) {
      auto prepared = Prepare(event, options, tail_budget);
      if (!prepared.ok()) return Error{prepared.error()};
      h = prepared->h;
    }
    if (h >= 1) return bounds;
    // The message states the points needed; the window scales as 1/h (the component
    // grid at least as fast), so jump to a spacing that should fit, with a margin.
    const std::string& message = bounds.error();
    const double need = std::strtod(message.c_str() + sizeof(kGridLimitError) - 1, nullptr);
    const double factor = std::max(2.0, 1.3 * need / static_cast<double>(kMaxGridPoints));
    h = std::min(1.0, factor * h);
    PldOptions coarser = options;
    coarser.discretization_interval = h;
    bounds = CertifiedBoundsOnGrid(event, target_is_eps, target, coarser, tail_budget);
  }
  // Both query kinds refine: for delta(eps) the gap is compared with tolerance * delta.
  if (!bounds.ok()) return bounds;
  const double first_h = bounds->h;
  // A wide gap with one component used many times whose bulk is narrow for the grid: the
  // decomposed lower bound (7), before refining (it usually closes the gap, and then the
  // refinements, which cannot, are skipped).
  double decomposed_h = 0;  // grid of the last attempt (0: none)
  auto try_decomposed = [&](RawBounds* b) {
    if (!(std::isfinite(b->upper) && b->upper > 0 &&
          b->upper - b->lower > 10 * static_cast<ld>(options.epsilon_tolerance) * b->upper)) {
      return;
    }
    decomposed_h = b->h;
    PldOptions at_grid = options;
    at_grid.discretization_interval = b->h;
    auto decomposed = DecomposedBoundsForEvent(event, at_grid, tail_budget, b->dominant, true,
                                               true, target_is_eps, target, b->upper);
    if (!decomposed.ok()) return;
    if (decomposed->lower.ok()) b->lower = std::max(b->lower, *decomposed->lower);
    // The upper bound is for the dominant direction only; the reported upper bound stays
    // the maximum over both directions (5).
    if (decomposed->upper.ok()) {
      b->upper = std::min(b->upper, std::max(*decomposed->upper, b->other_upper));
    }
  };
  try_decomposed(&*bounds);
  bool stalled = false;
  for (int round = 0; round < kMaxRefinements; ++round) {
    const ld wanted = 10 * static_cast<ld>(options.epsilon_tolerance) * bounds->upper;
    const ld gap = bounds->upper - bounds->lower;
    if (!std::isfinite(bounds->upper) || bounds->upper <= 0 || gap <= wanted) break;
    double factor = static_cast<double>(
        std::max<ld>(0.7L * std::sqrt(wanted / gap), 1.0L / 30));
    // A grid past kRefinementPoints is not tried; refine as far as it allows instead
    // (stop only where that is less than a 0.8x step).
    factor = std::max(factor, static_cast<double>(bounds->points) / kRefinementPoints);
    if (factor > 0.8) break;
    if (bounds->h * factor < 1e-7) break;
    PldOptions finer = options;
    finer.discretization_interval = bounds->h * factor;
    auto refined = CertifiedBoundsOnGrid(event, target_is_eps, target, finer, tail_budget);
    if (!refined.ok()) break;
    const bool progress = refined->upper - refined->lower < 0.8L * gap;
    // Both results are certified: keep the tighter side of each.
    refined->upper = std::min(refined->upper, bounds->upper);
    refined->lower = std::max(refined->lower, bounds->lower);
    bounds = refined;
    if (!progress) {
      stalled = true;
      break;
    }
  }
  // Where a finer grid did not help, the floating-point allowances (which grow as the
  // spacing shrinks) dominate, and a coarser grid may do better: e.g. q = 1e-4, sigma = 2,
  // 1e8 steps, whose default grid fits since the two-stage composition: [2.0916, 2.1888]
  // there, [2.1114, 2.1463] at 3x the spacing. One such grid is tried; both certified.
  if (stalled && first_h * 3 <= 1) {
    PldOptions coarser = options;
    coarser.discretization_interval = first_h * 3;
    auto other = CertifiedBoundsOnGrid(event, target_is_eps, target, coarser, tail_budget);
    if (other.ok()) {
      bounds->upper = std::min(bounds->upper, other->upper);
      bounds->lower = std::max(bounds->lower, other->lower);
    }
  }
  // Still a wide gap (a finer grid since the first attempt): try (7) again.
  if (bounds->h < decomposed_h) try_decomposed(&*bounds);
  return bounds;
}

constexpr double kMinDelta = 1e-200;

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
  auto raw = CertifiedBounds(event, /*target_is_eps=*/false, delta, options,
                             static_cast<ld>(delta) * 1e-7L);
  if (!raw.ok()) return Error{raw.error()};
  EpsilonBounds out{static_cast<double>(raw->upper), static_cast<double>(raw->lower), raw->h};
  // Rounding to double: keep the upper bound up and the lower bound down.
  // (0 is exact: the certified delta at eps = 0 is already <= delta.)
  if (std::isfinite(out.epsilon_upper) && raw->upper > 0) {
    out.epsilon_upper = std::nextafter(out.epsilon_upper, std::numeric_limits<double>::infinity());
  }
  out.epsilon_lower = std::max(0.0, std::nextafter(out.epsilon_lower, 0.0));
  out.epsilon_lower = std::min(out.epsilon_lower, out.epsilon_upper);
  // A NaN would be an arithmetic failure inside the accountant, never a bound.
  if (std::isnan(out.epsilon_upper) || std::isnan(out.epsilon_lower)) {
    return Error{"internal error: the pld accountant's epsilon bounds are not numbers"};
  }
  return out;
}

Result<CellMomentEnclosure> GaussianCellMomentsForTesting(double sigma, double q, bool add,
                                                          long double a, long double b) {
  if (!(sigma > 0 && q > 0 && q <= 1 && a < b)) {
    return Error{"GaussianCellMomentsForTesting: needs sigma > 0, q in (0, 1], a < b"};
  }
  const Mechanism m{Base::kGaussian, sigma, q, 0};
  CellMoments r;
  const Direction dir = add ? Direction::kAdd : Direction::kRemove;
  if (!GaussianLossCellMoments(m, dir, a, LossTailsAt(m, dir, a), b, LossTailsAt(m, dir, b),
                               QuadratureTrigger(1e12), &r)) {
    return Error{"the quadrature (2b) does not apply to this cell"};
  }
  return CellMomentEnclosure{r.c, r.c_err, r.d, r.d_err};
}

std::vector<std::pair<long double, long double>> GaussLegendreRuleForTesting(int points) {
  std::vector<std::pair<long double, long double>> out;
  int r = 0;
  while (r < kGlRules && kGlPoints[r] != points) ++r;
  if (r == kGlRules) return out;
  const GaussLegendreRule& g = GlRule(r);
  for (int i = 0; i < g.n; ++i) out.emplace_back(g.node[i], g.weight[i]);
  return out;
}

Result<double> DecomposedEpsilonBoundForTesting(const Event& event, double delta,
                                                double interval, bool upper) {
  PldOptions options;
  options.discretization_interval = interval;
  auto decomposed = DecomposedBoundsForEvent(
      event, options, static_cast<ld>(delta) * 1e-7L, Direction::kRemove, !upper, upper,
      /*target_is_eps=*/false, delta, std::numeric_limits<ld>::infinity());
  if (!decomposed.ok()) return Error{decomposed.error()};
  const Result<ld>& bound = upper ? decomposed->upper : decomposed->lower;
  if (!bound.ok()) return Error{bound.error()};
  return static_cast<double>(*bound);
}

Result<DeltaBounds> PldDelta(const Event& event, double epsilon, const PldOptions& options) {
  if (!(std::isfinite(epsilon) && epsilon >= 0)) {
    return Error{"epsilon must be finite and >= 0, got " + FormatDouble(epsilon)};
  }
  auto raw = CertifiedBounds(event, /*target_is_eps=*/true, epsilon, options, 1e-30L);
  if (!raw.ok()) return Error{raw.error()};
  DeltaBounds out{static_cast<double>(raw->upper), static_cast<double>(raw->lower), raw->h};
  if (raw->upper > 0) out.delta_upper = std::min(1.0, std::nextafter(out.delta_upper, 2.0));
  out.delta_lower = std::min(out.delta_upper, std::max(0.0, std::nextafter(out.delta_lower, 0.0)));
  if (std::isnan(out.delta_upper) || std::isnan(out.delta_lower)) {
    return Error{"internal error: the pld accountant's delta bounds are not numbers"};
  }
  return out;
}

Result<std::vector<ComposedPld>> PessimisticComposedPlds(const Event& event, double tail_mass,
                                                         const PldOptions& options) {
  if (!(tail_mass > 0 && tail_mass <= 0.01)) {
    return Error{"tail_mass must be in (0, 0.01], got " + FormatDouble(tail_mass)};
  }
  auto prepared = Prepare(event, options, static_cast<ld>(tail_mass) * 1e-3L);
  if (!prepared.ok()) return Error{prepared.error()};
  for (Direction dir : {Direction::kRemove, Direction::kAdd}) {
    if (dir == Direction::kAdd && prepared->symmetric) continue;
    auto built = BuildDirection(&*prepared, dir);
    if (!built.ok()) return Error{built.error()};
  }
  std::vector<ComposedPld> out;
  Eigen::FFT<double> fft;
  for (const auto* comps : {&prepared->remove, &prepared->add}) {
    if (comps->empty()) continue;
    // Untilted composition (lambda = 0 at target eps = -inf-ish): use delta(eps) target
    // at a very negative eps so that the tilt is 0 and the whole distribution is kept.
    auto composed = Compose(*comps, /*upper_pmf=*/true, prepared->h, /*target_is_eps=*/true,
                            -1e6, /*tolerance=*/1e-6, &fft);
    if (!composed.ok()) return Error{composed.error()};
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
