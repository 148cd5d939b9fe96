// Optimal conversions from Rényi DP to (ε, δ)-DP and to hypothesis-testing (f-DP)
// regions: Asoodeh, Liao, Calmon, Kosut, Sankar 2021 ("Three variants of differential
// privacy: lossless conversion and applications", IEEE JSAIT; arXiv:2008.06529),
// Sec. III–IV; Balle et al. 2020 ("Hypothesis testing interpretations and Rényi DP"),
// Sec. 4.
//
// The reduction to binary distributions (proved in conversions.cc, after Asoodeh et
// al., Sec. III, and Balle et al. 2020, Sec. 4): write a test of P vs Q by its acceptance
// region S, u = P(S) and y = Q(S). By data processing, the pair of Bernoulli
// distributions (u, 1−u) vs (y, 1−y) satisfies every Rényi bound that (P, Q)
// satisfies. Conversely every such Bernoulli pair IS a pair of output distributions
// with those Rényi bounds. Hence, with F the set of (u, y) satisfying all bounds,
//   δ(ε) = sup_{(u, y) ∈ F} u − e^ε y          (exact: attained by a binary pair),
//   type II error ≥ T(x) = min{y : (1 − x, y) ∈ F} for every test of type I error x.
// F is convex (each Rényi constraint is a sub-level set of a jointly convex function),
// so T is convex and both problems are one-dimensional concave / quasi-concave
// maximisations, solved with golden-section search and CERTIFIED by a concavity
// bound (see conversions.cc). The value is the smallest δ consistent with all the
// given Rényi values together (not only the best single order), so it is never larger
// than the per-order optimum, which in turn is never larger than the improved
// conversion of rdp.h (Balle et al. 2020, Thm. 21 / Canonne, Kamath, Steinke 2020).
//
// Rényi bounds are used in BOTH orders, D_α(P‖Q) ≤ ε(α) and D_α(Q‖P) ≤ ε(α): an RDP
// guarantee holds for every ordered pair of neighbouring datasets (Mironov 2017,
// Def. 4), and dpkit's RDP values (rdp.h) are such two-sided bounds (for the
// Poisson-subsampled Gaussian, Mironov, Talwar, Zhang 2019, Sec. 3, show that the
// reverse divergence, their B_α, is at most A_α).
//
// Every δ and ε returned is a certified upper bound up to floating-point rounding
// (~1e-12 relative): roots are taken on their infeasible side and maxima are bounded
// from above by concavity, never read off the best sample.
#ifndef DPKIT_ACCOUNTING_CONVERSIONS_H_
#define DPKIT_ACCOUNTING_CONVERSIONS_H_

#include <vector>

#include "dpkit/accounting/rdp.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// δ(ε) from the RDP curve: the smallest δ consistent with all (order, rdp) pairs,
// i.e. sup over binary pairs satisfying all of them (Asoodeh et al. 2021, Sec. III,
// extended to a set of orders). Orders finite > 1, rdp values >= 0 (+inf allowed: the
// order is ignored), same non-zero length; ε finite >= 0. RdpDelta::order is the
// order whose constraint binds at the optimum (the first order if none binds).
Result<RdpDelta> RdpToDeltaOptimal(const std::vector<double>& orders,
                                   const std::vector<double>& rdp, double epsilon);

// The inverse: the smallest ε >= 0 with RdpToDeltaOptimal(ε) <= δ, δ in (0, 1).
// ε = log sup_{u > δ} (u − δ) / T(1 − u) (see conversions.cc), verified by
// re-evaluating δ at the returned ε. +inf when every rdp value is +inf.
Result<RdpEpsilon> RdpToEpsilonOptimal(const std::vector<double>& orders,
                                       const std::vector<double>& rdp, double delta);

// Per-order optimal conversion (one Rényi bound in both orders): Asoodeh et al. 2021,
// Sec. III. Exposed for comparison with RdpToDelta's single-order formulas; rdp_value
// finite >= 0, order finite > 1, ε finite >= 0.
Result<double> RdpOrderToDeltaOptimal(double order, double rdp_value, double epsilon);

// Lower bound on the type II error of any test with type I error `type_one_error`
// (in [0, 1]) between outputs on neighbouring datasets, implied by the RDP curve:
// T(x) = min{y : (1 − x, y) satisfies every Rényi bound} (Asoodeh et al. 2021, Sec. IV;
// Balle et al. 2020, Thm. 21). Convex, non-increasing and symmetric (T = T^{-1}); the
// value is the infeasible-side root, so never above the exact T(x).
Result<double> RdpTradeoffLowerBound(const std::vector<double>& orders,
                                     const std::vector<double>& rdp,
                                     double type_one_error);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_CONVERSIONS_H_
