#include "dpkit/accounting/internal/pld_component_pmfs.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_cell_moments.h"
#include "dpkit/accounting/internal/pld_cells.h"
#include "dpkit/accounting/internal/pld_loss_tails.h"
#include "dpkit/accounting/internal/pld_search.h"

namespace dpkit::accounting::pld_internal {
namespace {

// The grid range of the cells of BuildContinuousPmfs: cells lo, ..., hi - 1 on the grid
// points lo, ..., hi.
struct GridIndexRange {
  int64_t lo, hi;
};

// Lowest index: P(L <= lo h) <= tail (or 0 for losses bounded below); highest: P(L > hi h)
// <= tail, plus two empty cells on top that keep the optimistic top handling away from
// mass. Losses are kept within [-kMaxLoss, kMaxLoss] so that e^{loss} never overflows a
// long double (LossTailsAt and the cell weights take e^{loss}). Mass beyond the range
// stays certified: the pessimistic PMF puts the P-mass above the top at +inf and the
// P-mass below the bottom at the bottom point (both only raise delta(eps)); the
// optimistic PMF leaves both out (only lowers it). Each end is found by doubling, then by
// bisection towards the extreme index that still meets the tail budget.
template <typename TailsAt>
Result<GridIndexRange> ChooseGridRange(const TailsAt& tails, double h, ld tail,
                                       const ContinuousPmfOptions& options) {
  const int64_t cap = static_cast<int64_t>(std::ceil(kMaxLoss / h));
  int64_t lo = -1;
  if (options.lo_fixed) {
    lo = *options.lo_fixed;
  } else {
    while (lo > -cap && tails(lo).fp > tail) {
      if (lo < -kMaxGridPoints) return GridLimitError(-lo, kMaxGridPoints, h);
      lo *= 2;
    }
    lo = std::max(lo, -cap);
    // fp(a) <= tail; shrink towards the largest such index.
    int64_t a = lo;
    if (tails(0).fp <= tail) a = 0;
    lo = Bisect<int64_t>(
             a, 0, [&](int64_t mid) { return !(tails(mid).fp <= tail); },
             [](int64_t a, int64_t b) { return !(b - a > 1 && a != 0); })
             .lo;
  }
  int64_t hi = 1;
  if (options.hi_fixed) {
    hi = *options.hi_fixed;
    if (hi <= lo) hi = lo + 1;
    return GridIndexRange{lo, hi};
  }
  while (hi < cap && tails(hi).sp > tail) {
    if (hi > kMaxGridPoints) return GridLimitError(hi, kMaxGridPoints, h);
    hi *= 2;
  }
  hi = std::min(hi, cap);
  // sp(b) <= tail; shrink towards the smallest such index.
  int64_t b = hi;
  if (tails(0).sp <= tail) b = 0;
  hi = Bisect<int64_t>(
           0, b, [&](int64_t mid) { return tails(mid).sp <= tail; },
           [](int64_t a, int64_t b) { return !(b - a > 1 && b != 0); })
           .hi;
  if (hi <= lo) hi = lo + 1;
  hi += 2;  // two empty cells on top keep the optimistic top handling away from mass
  return GridIndexRange{lo, hi};
}

// The cell moments of the cells lo + i, i < n, from the tails t[i] at their ends (n + 1
// of them), with the errors of the tail differences and of the tails themselves; where
// `quadrature` (Gaussian base) and those errors leave a moment uncertain, intersected with
// the enclosures of (2b).
CellBounds CellsFromTails(const Mechanism& m, Direction dir, double h, ld tail, int64_t lo,
                          const std::vector<LossTails>& t, bool quadrature, double steps) {
  const int64_t n = static_cast<int64_t>(t.size()) - 1;
  const ld eh = std::exp(static_cast<ld>(h));
  CellBounds cells;
  std::vector<ld>& c_up = cells.c_up;
  std::vector<ld>& d_up = cells.d_up;
  std::vector<ld>& c_lo = cells.c_lo;
  std::vector<ld>& d_lo = cells.d_lo;
  c_up.resize(n);
  d_up.resize(n);
  c_lo.resize(n);
  d_lo.resize(n);
  const ld trigger = QuadratureTrigger(steps);
  // A cell whose moments' uncertainty moves less P-mass than a hundredth of the tail
  // budget spread over all cells is left as it is.
  const ld negligible = 0.01_ld * tail / static_cast<ld>(n) * std::expm1(static_cast<ld>(h));
  ld xi = 1;
  for (int64_t i = 0; i < n; ++i) {
    // Cell (eps_i, eps_{i+1}]: P-mass A, Q-mass B from the smaller tail of each pair.
    ld A, eA, B, eB;
    if (t[i].sp <= 0.5_ld) {
      A = t[i].sp - t[i + 1].sp;
      eA = kCdfUlps * kLdUnit * (t[i].sp + t[i + 1].sp);
    } else {
      A = t[i + 1].fp - t[i].fp;
      eA = kCdfUlps * kLdUnit * (t[i].fp + t[i + 1].fp);
    }
    if (t[i].sq <= 0.5_ld) {
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
  return cells;
}

}  // namespace

Result<void> BuildContinuousPmfs(const Mechanism& m, Direction dir, double h, ld tail,
                                 Pmf* upper, Pmf* lower, const ContinuousPmfOptions& options) {
  auto tails = [&](int64_t k) {
    const ld l = static_cast<ld>(k) * h;
    return options.custom != nullptr ? (*options.custom)(l) : LossTailsAt(m, dir, l, options.dg);
  };
  const Result<GridIndexRange> range = ChooseGridRange(tails, h, tail, options);
  if (!range.ok()) return range.error_value();
  const int64_t lo = range->lo;
  const int64_t n = range->hi - lo;  // cells 0..n-1, grid points 0..n
  if (n > kMaxGridPoints) return GridLimitError(n, kMaxGridPoints, h);
  std::vector<LossTails> t(n + 1);
  for (int64_t i = 0; i <= n; ++i) t[i] = tails(lo + i);
  const bool quadrature =
      options.custom == nullptr && options.dg == nullptr && m.base == Base::kGaussian;
  const CellBounds cells = CellsFromTails(m, dir, h, tail, lo, t, quadrature, options.steps);
  // With a fixed end, the law's mass beyond it belongs to another part (see (7)) and is
  // left out of both PMFs.
  const ld below_mass =
      options.lo_fixed ? 0 : t[0].fp * (1 + kCdfUlps * kLdUnit) + t[0].p_err;
  const ld above_mass = options.hi_fixed
                            ? 0
                            : t[n].sp * (1 + kCdfUlps * kLdUnit) + t[n].p_err + 8 * kLdMin;
  CellsToPmfs(lo, h, cells, below_mass,  // mass <= eps_0 moves up
              above_mass, upper, lower, options.lower_alt);
  return OkResult();
}

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
  ContinuousPmfOptions options;
  options.custom = &custom;
  return BuildContinuousPmfs(m, dir, h, tail, &unused, lower, options);
}

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
  if (hi - lo + 1 > kMaxGridPoints) return GridLimitError(hi - lo + 1, kMaxGridPoints, h);
  lower->min_index = lo;
  lower->mass.assign(hi - lo + 1, 0);
  lower->infinity_mass = infinity;
  for (const auto& [a, mass] : placed) lower->mass[a - lo] += mass;
  for (size_t i = 0; i < dense.mass.size(); ++i) {
    lower->mass[dense.min_index + static_cast<int64_t>(i) - lo] += std::max<ld>(dense.mass[i], 0);
  }
  return OkResult();
}

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
    upper->mass[a + 1 - lo] += w * wb * (1 + 8 * kLdUnit) + 4 * kLdMin;
    lower->mass[a - lo] += w * (1 - 8 * kLdUnit);
  }
}

}  // namespace dpkit::accounting::pld_internal
