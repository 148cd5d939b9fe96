// The model-guided search behind the PLD calibrations (//accounting:calibrate).
//
// A PLD evaluation costs tens of milliseconds, so a calibration by plain bisection (11-17
// evaluations) is slow. This search finds the same kind of answer with few of them:
//  1. Locate: cheap, coarse PLD evaluations (a looser grid; still certified bounds
//     [lower, upper] on the exact epsilon) fitted by a local model, log epsilon linear in
//     log x (Newton / secant steps on the two latest points; the first step uses a slope
//     from a cheap accountant), until a step is shorter than 0.2 %. A coarse lower bound
//     above the target certifies a "bad" point: the accountant's own upper bound is at
//     least the exact epsilon, which is at least that lower bound.
//  2. Close: evaluations by the accountant itself ("fine", the bound the caller
//     certifies with), placed by the same model from the latest fine point so that a
//     good and a bad point end up within the requested width: aim just inside the good
//     side of the predicted boundary, then step one width across it. Every third fine
//     evaluation that has not closed the bracket bisects it instead, so the search ends
//     even where the model is wrong.
// The answer is always a point whose fine upper bound was evaluated and meets the target
// (re-accounted by construction), next to a certified bad point (or at a limit of the
// range), which is the guarantee of the bisection it replaces: certified, and optimal to
// the stated width. It visits other points than that bisection did, so its answer differs
// from the bisection's within that width.
#ifndef DPKIT_ACCOUNTING_CALIBRATE_SEARCH_H_
#define DPKIT_ACCOUNTING_CALIBRATE_SEARCH_H_

#include <functional>
#include <optional>

#include "dpkit/accounting/result.h"

namespace dpkit::accounting::calibrate_internal {

// Certified bounds on epsilon at one point: lower <= exact epsilon <= upper.
struct EpsilonInterval {
  double upper;
  double lower;
};

// eval(x, fine): fine = the accountant's own bounds (the answer's epsilon is `upper`);
// !fine = cheaper, looser certified bounds, used only to place points and to certify
// bad ones.
using IntervalAt = std::function<Result<EpsilonInterval>(double x, bool fine)>;

struct SearchSpec {
  double target;          // epsilon target: x is good when its fine upper bound <= target
  double start;           // first point (clamped into [min_x, max_x])
  double min_x, max_x;    // the range, both > 0
  bool good_is_large;     // good points lie above the boundary (noise) or below (rate, T)
  bool integer;           // x integral: stop when a good and a bad point are adjacent
  double relative_width;  // continuous x: stop when max/min of good, bad <= 1 + this
  // d log epsilon / d log x near start, from a cheap accountant; 0 when unknown.
  double slope_hint = 0;
};

struct SearchPoint {
  double x;
  double epsilon;  // fine upper bound at x (<= target)
};

// The good point next to the boundary, or nullopt when even the good-side limit of the
// range is bad. Errors of eval are passed on.
Result<std::optional<SearchPoint>> ModelSearch(const IntervalAt& eval, const SearchSpec& spec);

}  // namespace dpkit::accounting::calibrate_internal

#endif  // DPKIT_ACCOUNTING_CALIBRATE_SEARCH_H_
