// f-DP tradeoff curves (Dong, Roth, Su 2019, "Gaussian differential privacy"; Bu,
// Dong, Long, Su 2020) as certified piecewise-linear LOWER envelopes.
//
// A tradeoff curve T(α) is the smallest type II error of a test between the outputs on
// neighbouring datasets with type I error at most α. A mechanism is f-DP when every
// such curve lies above f. Every curve built here is a piecewise-linear, convex,
// non-increasing function on [0, 1] that lies BELOW the true curve of the mechanism
// it describes (so every privacy statement read off it is certified), except the
// Gaussian G_μ curve when μ comes from the CLT (Bu et al. 2020, eq. 3.1), which is
// then an approximation of the mechanism; the callers label it.
//
// Sources of curves:
//  * PldTradeoffCurve: from the pessimistic composed PLD of //accounting:pld.
//  * RdpTradeoffCurve: from an RDP curve (Asoodeh et al. 2021; see conversions.h).
//  * GaussianTradeoffCurve: tangent lines of G_μ (DRS 2019, Sec. 2.2).
//  * ApproxDpTradeoffCurve: f_{ε,δ} (DRS 2019, Prop. 2.5; exact).
//  * TradeoffFromDeltas: sup_ε f_{ε,δ(ε)} (DRS 2019, Prop. 2.12).
// Operations: Inverse, PointwiseMax, SymmetrizedHull = min{f, f^{-1}}**,
// SubsampledTradeoff = C_p(f) = min{f_p, f_p^{-1}}** (DRS 2019, Thm. 4.2; Bu et al.
// 2020, Sec. 2.2), ConvexConjugate, DeltaFromTradeoff = 1 + f*(−e^ε) (DRS 2019,
// Prop. 2.12), MinimumErrorSum = min_α α + f(α).
//
// For the browser calculator (web/): evaluate a curve with EvaluateTradeoff, e.g.
//   auto pld = PldTradeoffCurve(event);            // certified
//   auto rdp = RdpTradeoffCurveForEvent(event, 200); // certified
//   double beta = EvaluateTradeoff(*pld, alpha);
#ifndef DPKIT_ACCOUNTING_FDP_H_
#define DPKIT_ACCOUNTING_FDP_H_

#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// Vertices of a piecewise-linear tradeoff curve: alpha strictly increasing from 0 to
// 1, beta non-increasing in [0, 1] (convex for every curve produced here except
// Combine-style intermediate results documented as such), beta.back() == 0.
struct TradeoffCurve {
  std::vector<double> alpha;
  std::vector<double> beta;
};

// β at α in [0, 1] by linear interpolation; NaN outside [0, 1].
double EvaluateTradeoff(const TradeoffCurve& curve, double alpha);

// Checks the invariant above (for curves from outside, e.g. a file). Also convexity
// when `require_convex`, up to 1e-12 absolute.
Result<void> CheckTradeoffCurve(const TradeoffCurve& curve, bool require_convex);

// f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)}: exact, 4 vertices
// (DRS 2019, Prop. 2.5). ε finite >= 0, δ in [0, 1].
Result<TradeoffCurve> ApproxDpTradeoffCurve(double epsilon, double delta);

// Lower envelope of G_μ(α) = Φ(Φ^{-1}(1 − α) − μ) from `points` tangent lines at
// z = Φ^{-1}(1 − α) evenly spaced in [−9, μ + 9] (G_μ is convex, so every tangent lies
// below it; the gap is O((μ + 18)^2 / points^2)). μ finite >= 0, points in [2, 1e6].
Result<TradeoffCurve> GaussianTradeoffCurve(double mu, int points = 400);

// T(P, Q) for ONE direction of a composed PLD (L = log dP/dQ under P):
// sup_ε e^{-ε}(1 − δ(ε) − α), δ from the (dominating) PLD; exact for the discrete
// pair, hence below the true T(P, Q) because the PLD dominates for every ε.
TradeoffCurve PldDirectionTradeoff(const ComposedPld& pld);

// Certified lower envelope of the mechanism's tradeoff curve from its pessimistic
// PLD. With T_0, T_1 the curves of the two directions (the same pair in both orders:
// T(Q, P) = T(P, Q)^{-1}), A = max(T_0, T_1^{-1}) <= T(P, Q) and A^{-1} <= T(Q, P), so
// the mechanism is min{A, A^{-1}}-DP, and we return the convex hull min{A, A^{-1}}**
// (a symmetric tradeoff function, as in the subsampling theorem, DRS 2019, Thm. 4.2).
// tail_mass: probability moved to +inf by truncation, in (0, 0.01].
Result<TradeoffCurve> PldTradeoffCurve(const Event& event, const PldOptions& options = {},
                                       double tail_mass = 1e-12);

// Certified lower envelope of the RDP-implied tradeoff T(x) = max_α T_α(x)
// (conversions.h, RdpTradeoffLowerBound), sampled at `points` type I errors (log-
// spaced towards 0 and 1, even in between) and turned into a PIECEWISE-LINEAR LOWER
// bound by secant extension (T is convex: on [x_i, x_{i+1}] it lies above the secants
// of the neighbouring intervals). points in [8, 1e5].
Result<TradeoffCurve> RdpTradeoffCurve(const std::vector<double>& orders,
                                       const std::vector<double>& rdp, int points = 400);
// The same for an event, with ComputeRdp at DefaultRdpOrders().
Result<TradeoffCurve> RdpTradeoffCurveForEvent(const Event& event, int points = 400);

// f^{-1}(t) = inf{α in [0, 1] : f(α) <= t} (DRS 2019, Sec. 2.1): the reflection of
// the graph. Convex when f is.
TradeoffCurve InverseTradeoff(const TradeoffCurve& curve);

// Pointwise max (intersection of the regions) and min of two curves; exact for
// piecewise-linear curves (breakpoints and crossings). max of convex is convex; min
// generally is not (use LowerConvexHull or SymmetrizedHull).
TradeoffCurve PointwiseMax(const TradeoffCurve& a, const TradeoffCurve& b);
TradeoffCurve PointwiseMin(const TradeoffCurve& a, const TradeoffCurve& b);

// Lower convex hull f** of a curve (the largest convex function below it).
TradeoffCurve LowerConvexHull(const TradeoffCurve& curve);

// min{f, f^{-1}}**: the symmetric tradeoff function implied by a bound f on one order
// of the pair (DRS 2019, proof of Thm. 4.2).
TradeoffCurve SymmetrizedHull(const TradeoffCurve& curve);

// The subsampling operator of DRS 2019, Thm. 4.2 / Bu et al. 2020, Sec. 2.2:
// C_p(f) = min{f_p, f_p^{-1}}** with f_p = p f + (1 − p) Id, Id(α) = 1 − α.
// sampling_rate in [0, 1].
Result<TradeoffCurve> SubsampledTradeoff(const TradeoffCurve& curve, double sampling_rate);

// Convex conjugate f*(y) = sup_{α in [0, 1]} y α − f(α) (attained at a vertex).
double ConvexConjugate(const TradeoffCurve& curve, double y);

// δ(ε) = 1 + f*(−e^ε) (DRS 2019, Prop. 2.12): the smallest δ such that an f-DP
// mechanism is (ε, δ)-DP, for ε finite (negative ε allowed: the one-sided hockey
// stick). Clamped to [0, 1].
double DeltaFromTradeoff(const TradeoffCurve& curve, double epsilon);

// The way back (DRS 2019, Prop. 2.12): f = sup_i f_{ε_i, δ_i}, the smallest-region
// curve of a mechanism that is (ε_i, δ_i)-DP for each i. ε_i finite >= 0, δ_i in
// [0, 1], same non-zero length.
Result<TradeoffCurve> TradeoffFromDeltas(const std::vector<double>& epsilons,
                                         const std::vector<double>& deltas);

// min_α α + f(α) (at a vertex): the smallest sum of type I and type II errors
// (Bu et al. 2020, Sec. 5; = 1 − TV for the exact curve). For a certified lower
// envelope it is a certified lower bound.
double MinimumErrorSum(const TradeoffCurve& curve);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_FDP_H_
