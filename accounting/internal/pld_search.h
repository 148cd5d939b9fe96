// The one-dimensional searches of the PLD accountant: bisection on a monotone predicate
// (real or integer) and golden-section minimisation, each with a fixed iteration budget and
// stopping rule.
//
// Why not Boost.Math's boost::math::tools::bisect / brent_find_minima: every certified
// bound the accountant prints depends on the exact sequence of points these searches
// visit (a grid range, a window width, the tilt, the crossing of a delta-curve), and
// dpkit's printed bounds are pinned bit for bit (//tests/golden). Boost's bisect
//  * evaluates both ends first and needs a sign change there: the 64-step search for the
//    lower epsilon bound (EpsilonFor) only knows its lower end's side;
//  * stops where the midpoint equals an end, keeping the old lower end: after 64 halvings
//    of a grid cell the long double midpoint can equal the upper end, where the search
//    here moves the lower end onto it (a different lower bound, by one long double ulp);
//  * computes an integer midpoint as (lo + hi) / 2, which rounds towards zero, while the
//    grid-range searches (BuildContinuousPmfs) use lo + (hi - lo) / 2;
// and Brent's method visits other points than the golden section that chose the tilts.
// So the searches here reproduce the visiting order the bounds were certified and pinned
// with; the predicates and objectives they are given are where the mathematics lives.
#ifndef DPKIT_ACCOUNTING_INTERNAL_PLD_SEARCH_H_
#define DPKIT_ACCOUNTING_INTERNAL_PLD_SEARCH_H_

#include <limits>
#include <type_traits>

namespace dpkit::accounting::pld_internal {

// A bracket [lo, hi] left by a search.
template <typename T>
struct Bracket {
  T lo, hi;
};

// Bisection of [lo, hi] for the boundary of a predicate that is false below it and true
// above (in_upper(x): x lies at or above the boundary): while fewer than max_iterations
// steps were taken and !done(lo, hi), the midpoint (lo + hi) / 2 (integers: lo + (hi -
// lo) / 2) replaces hi where in_upper holds and lo elsewhere. The ends themselves are
// never evaluated: the caller knows (or does not need) their sides.
template <typename T, typename InUpper, typename Done>
Bracket<T> Bisect(T lo, T hi, InUpper in_upper, Done done,
                  int max_iterations = std::numeric_limits<int>::max()) {
  for (int it = 0; it < max_iterations && !done(lo, hi); ++it) {
    T mid;
    if constexpr (std::is_integral_v<T>) {
      mid = lo + (hi - lo) / 2;
    } else {
      mid = (lo + hi) / 2;
    }
    if (in_upper(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return {lo, hi};
}

// Golden-section search for a minimum of a unimodal objective on [a, b]: `iterations`
// steps, each comparing the points at 0.382 and 0.618 of the bracket and dropping the part
// beyond the worse one; returns the centre of the final bracket.
template <typename T, typename Objective>
T GoldenSectionMinimum(T a, T b, Objective objective, int iterations) {
  for (int it = 0; it < iterations; ++it) {
    const T m1 = a + (b - a) * static_cast<T>(0.382L);
    const T m2 = a + (b - a) * static_cast<T>(0.618L);
    if (objective(m1) < objective(m2)) {
      b = m2;
    } else {
      a = m1;
    }
  }
  return (a + b) / 2;
}

}  // namespace dpkit::accounting::pld_internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_PLD_SEARCH_H_
