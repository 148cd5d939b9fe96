#include "dpkit/accounting/internal/pld_cells.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace dpkit::accounting::pld_internal {

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

void TangentLowerPmf(int64_t lo, double h, const CellBounds& cells, Pmf* lower) {
  const int64_t n = static_cast<int64_t>(cells.c_up.size());
  const ld eh = std::exp(static_cast<ld>(h));
  const ld em1 = std::expm1(static_cast<ld>(h));
  // Optimistic masses: connect-the-dots with c_lo, d_lo, lowered by m (see (3a)).
  std::vector<ld> m_corr(n + 1, 0);
  auto excess = [&](int64_t i) -> ld {
    const ld s = cells.c_up[i] + cells.d_up[i];
    return s > 0 ? cells.c_up[i] * cells.d_up[i] / s : 0;
  };
  for (int64_t i = 0; i <= n; ++i) {
    ld v = 0;
    if (i > 0) v = std::max(v, excess(i - 1));
    if (i < n) v = std::max(v, excess(i));
    m_corr[i] = v * (1 + 8 * kLdUnit);
  }
  std::vector<ld> p(n + 1);
  for (int64_t i = 0; i <= n; ++i) {
    const ld d = i < n ? cells.d_lo[i] : 0;
    const ld c = i > 0 ? cells.c_lo[i - 1] : 0;
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

// The mass-preserving chain optimistic PMF of (3b) on the grid points lo, ..., lo + n.
// Largest |loss| of a grid point at which the chain below works with e^{loss} itself: far
// inside the exponent range of the type exp returns (long double; double under Emscripten).
#if defined(__EMSCRIPTEN__)
constexpr ld kChainLossLimit = 700;
#else
constexpr ld kChainLossLimit = 11000;
#endif

void ChainLowerPmf(int64_t lo, double h, const CellBounds& cells, Pmf* lower) {
  const int64_t n = static_cast<int64_t>(cells.c_lo.size());
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
      const ld c = std::max<ld>(cells.c_lo[i], 0), d = std::max<ld>(cells.d_lo[i], 0);
      const ld d_big = std::max<ld>(cells.d_up[i], d);
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

void CellsToPmfs(int64_t lo, double h, const CellBounds& cells, ld below_mass, ld above_mass,
                 Pmf* upper, Pmf* lower, Pmf* lower_alt) {
  const int64_t n = static_cast<int64_t>(cells.c_up.size());
  const ld eh = std::exp(static_cast<ld>(h));
  const ld em1 = std::expm1(static_cast<ld>(h));
  // Pessimistic connect-the-dots masses: P-mass at eps_i = (d_i + e^h c_{i-1})/(e^h-1).
  upper->min_index = lo;
  upper->mass.assign(n + 1, 0);
  for (int64_t i = 0; i <= n; ++i) {
    const ld d = i < n ? cells.d_up[i] : 0;
    const ld c = i > 0 ? cells.c_up[i - 1] : 0;
    upper->mass[i] = (d + eh * c) / em1 * (1 + 8 * kLdUnit);
  }
  upper->mass[0] += below_mass;  // mass <= eps_0 moves up
  upper->infinity_mass = above_mass;

  Pmf tangent, chain;
  TangentLowerPmf(lo, h, cells, &tangent);
  ChainLowerPmf(lo, h, cells, &chain);
  CombineLowerPmfs(h, std::move(chain), tangent, lower);
  if (lower_alt != nullptr) *lower_alt = std::move(tangent);
}

}  // namespace dpkit::accounting::pld_internal
