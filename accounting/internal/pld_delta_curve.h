// The delta-curve and epsilon search: the certified delta(eps) of a composed window
// (every error bound added for the upper bound, subtracted for the lower one), and the
// certified epsilon(delta) found on it.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_DELTA_CURVE_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_DELTA_CURVE_H_

#include <cstdint>
#include <vector>

#include "dpkit/accounting/internal/pld_common.h"
#include "dpkit/accounting/internal/pld_fft_composition.h"

namespace dpkit::accounting::pld_internal {

// Certified delta-curve of a composed PMF: untilted entry masses with every error bound
// added (upper) or subtracted (lower), and suffix sums for evaluation. The suffix sums are
// kept only at every kAnchor-th entry from the top (the walk's state there, (9) in
// pld_delta_curve.cc); DeltaAt replays at most kAnchor entries from the nearest one, with
// the same arithmetic as the full walk, so every value is the one a stored sum would give,
// bit for bit, at 1/30 of the memory (q 1e-4, sigma 0.8, T 1e5: two 1.7M-entry windows
// held 69 MB of sums each).
struct DeltaCurve {
  Bound bound;
  ld h;
  int64_t start = 0, n = 0;
  // The window's entries and what MakeCurve derives each term from (Composed's fields).
  std::vector<double> tilted;
  ld entry_error = 0;
  int64_t support_lo = 0, support_hi = 0;
  // Walk state before entry n - 1 - k kAnchor: suffix sums of w_j and of w_j e^{o_j - l_j}
  // over the entries above it, and the offset index g of (8).
  std::vector<ld> anchor_s1, anchor_s2;
  std::vector<int64_t> anchor_offset;
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

// The curve of a composed window for the bound asked for. It takes the window's entries
// over: pass the composition with std::move where it is not needed afterwards (a copy of
// the window was at the heap's peak of q 1e-4, sigma 0.8, T 1e5: 77.6 MB, 72.1 MB without).
DeltaCurve MakeCurve(Composed c, Bound bound);

// Certified delta at eps (upper: every error bound added; lower: subtracted).
ld DeltaAt(const DeltaCurve& c, ld eps);

// Upper: the smallest eps >= 0 with DeltaAt(eps) <= delta (DeltaAt is non-increasing:
// bisection). Lower: an eps with DeltaAt(eps) > delta, as large as can be found; since
// the true delta is non-increasing and >= the lower curve, the true eps(delta) is at
// least that (any such eps is a valid lower bound). The lower curve is not monotone (its
// aliasing allowance grows towards small losses), so its grid values are scanned
// downwards from `start_hint` (the upper bound of the same direction: above it the lower
// curve is below delta) and the crossing refined inside one cell, where it is monotone.
ld EpsilonFor(const DeltaCurve& c, ld delta, ld start_hint);

// The curve's certified answer to a query: DeltaAt(query.value) or EpsilonFor(query.value,
// hint).
ld CurveAnswer(const DeltaCurve& c, const Query& query, ld hint);

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_DELTA_CURVE_H_
