// Rényi differential privacy (RDP) accounting: the moments accountant of Abadi et al.
// 2016 in the RDP form of Mironov 2017.
//
// An RDP curve is a list of orders α > 1 and, at each, an upper bound ε(α) on the
// Rényi divergence of order α between the outputs on neighbouring datasets. Curves
// compose by addition (Mironov 2017, Prop. 1), and convert to (ε, δ)-DP by minimising
// over the orders.
//
// Every value returned is an upper bound on the true RDP (the exact value where one is
// known, otherwise a cited upper bound), computed in log space so that orders up to
// 10^5 do not overflow and sampling rates down to 1e-12 keep full relative precision.
// +inf is a valid (trivial) upper bound and is returned where no finite bound is known;
// each function documents when. Floating-point rounding is the only further error: below
// ~1e-10 relative in the tests against 50-digit and quadrature references.
//
// Neighbouring relations follow the papers: the Poisson-subsampled Gaussian bound is for
// adding or removing one record (Mironov, Talwar, Zhang 2019), the without-replacement
// bound for replacing one (Wang, Balle, Kasiviswanathan 2019), as in TF Privacy.
#ifndef DPKIT_ACCOUNTING_RDP_H_
#define DPKIT_ACCOUNTING_RDP_H_

#include <cstdint>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// The default order grid (sorted, all > 1):
//   fractional orders near 1: 1.01 1.02 1.03 1.05 1.075 1.1 1.15 ... 1.9 (the optimal
//     order for large ε or few steps lies there),
//   2 to 6 in steps of 0.25, the integers 7..64 (the usual optimum for DP-SGD),
//   larger orders 72 ... 20000 roughly geometric (the optimum for very small δ or
//     very large noise), so that ε for δ down to 1e-300 is found.
std::vector<double> DefaultRdpOrders();

// The orders TensorFlow Privacy's compute_dp_sgd_privacy used (v0.2 - v0.8):
// [1 + x/10 for x in 1..99] + [12, 13, ..., 63]. Use these to reproduce its numbers.
std::vector<double> TfPrivacyOrders();

// RDP at each order of an event tree. Supported: Gaussian (exact, α/(2σ²)), Laplace
// (exact), PureDp (exact worst case), BoundedRange (exact worst case, RdpBoundedRange),
// PoissonSampled(q, Gaussian) (exact), PoissonSampled(q, anything else supported) (the
// general upper bound of Zhu & Wang 2019, Thm. 6, at integer orders, interpolated in the
// cumulant at fractional ones, capped by the inner RDP and, for pure-DP inner events, by
// the RDP of the amplified ε), SampledWithoutReplacement over any supported event
// (Wang, Balle, Kasiviswanathan 2019 Thm. 9 upper bound at integer orders, interpolated
// in the cumulant at fractional ones, their Cor. 10), SelfComposed (count × inner),
// Composed (sum). ApproxDp events are errors (no RDP bound exists for δ > 0).
// Orders must be finite and > 1. At a fractional order whose Poisson-subsampled
// Gaussian series does not converge within the term limit, the value is +inf (a valid,
// trivial upper bound) so that the conversions simply skip that order; no order is
// dropped from the output. RdpPoissonSubsampledGaussian reports the reason as an error.
// Orders of sampled events must be <= kMaxSampledRdpOrder (their sums have one term per
// unit of order).
Result<std::vector<double>> ComputeRdp(const Event& event, const std::vector<double>& orders);

// Default limit on the number of series terms at a fractional order.
inline constexpr int64_t kDefaultRdpSeriesTermLimit = 2000000;
// Largest order accepted for sampled events.
inline constexpr double kMaxSampledRdpOrder = 1e6;

// ComputeRdp with a different series term limit (tests, or callers who trade time for
// fewer +inf orders).
Result<std::vector<double>> ComputeRdpWithTermLimit(const Event& event,
                                                    const std::vector<double>& orders,
                                                    int64_t max_terms);

// RDP of the Poisson-subsampled Gaussian mechanism (Mironov, Talwar, Zhang 2019):
// log(A_α)/(α − 1). Integer α: the binomial sum of Sec. 3.2 (finite, positive terms).
// Fractional α: the two series of Sec. 3.3, summed until the alternating tail is bounded
// by its first omitted term, which is then added (so the value stays an upper bound).
// Errors: q outside (0, 1], σ not finite > 0, α not finite in (1, kMaxSampledRdpOrder]
// (q < 1), max_terms < 1, or a fractional series
// that has not converged within `max_terms` terms.
Result<double> RdpPoissonSubsampledGaussian(double sampling_rate, double noise_multiplier,
                                            double order);
Result<double> RdpPoissonSubsampledGaussianWithTermLimit(double sampling_rate,
                                                         double noise_multiplier,
                                                         double order, int64_t max_terms);

// RDP of the Laplace mechanism with scale b (sensitivity 1), Mironov 2017, Prop. 6.
Result<double> RdpLaplace(double scale, double order);

// Tight RDP of any ε-DP mechanism: that of randomized response, which dominates every
// ε-DP mechanism (Kairouz, Oh, Viswanath 2015, Thm. 2.1; data processing), with the
// randomized-response RDP of Mironov 2017, Table 2. Always ≤ min(ε, αε²/2).
Result<double> RdpPureDp(double epsilon, double order);

// Tight RDP of any ε-bounded-range mechanism (Durfee & Rogers 2019; e.g. the
// exponential mechanism with P ∝ exp(ε u/(2Δ))): the maximum of the Rényi divergence
// over all pairs whose privacy loss ranges over an interval of length ε, attained by a
// two-output pair, in closed form (derivation at the definition; Cesar & Rogers 2021).
// Always ≤ min(αε²/8, ε) (Cesar & Rogers 2021: ε-BR implies (ε²/8)-zCDP) and
// ≤ RdpPureDp(ε, α); ≥ RdpPureDp(ε/2, α) (randomized response with ε/2 is ε-BR).
Result<double> RdpBoundedRange(double epsilon, double order);

// Zhu & Wang 2019 ("Poisson subsampled Rényi differential privacy", Thm. 6): an upper
// bound on the RDP at integer `order` in [2, kMaxSampledRdpOrder] of any mechanism with
// RDP inner_rdp[l] at each order l = 2..order (entries 0 and 1 are ignored; values >= 0,
// +inf allowed) run on a Poisson sample of rate sampling_rate in (0, 1], for adding or
// removing one record. Never more than inner_rdp[order]; equal to it at rate 1.
Result<double> RdpPoissonSubsampledUpperBound(double sampling_rate,
                                              const std::vector<double>& inner_rdp,
                                              int64_t order);

enum class RdpConversion {
  kClassic,   // Mironov 2017, Prop. 3: ε = ε(α) + log(1/δ)/(α − 1)
  kImproved,  // Balle et al. 2020, Thm. 21: ε = ε(α) + log((α−1)/α) − (log δ + log α)/(α−1)
};

// Name for output: "classic" / "improved".
const char* RdpConversionName(RdpConversion conversion);

struct RdpEpsilon {
  double epsilon;  // smallest ε over the orders (>= 0; +inf if every order gives +inf)
  double order;    // the order that attains it (the first order if ε is +inf)
};
struct RdpDelta {
  double delta;  // smallest δ over the orders, in [0, 1]
  double order;  // the order that attains it
};

// (ε, δ)-DP from an RDP curve: the minimum over the orders. Orders finite > 1, rdp
// values >= 0 (+inf allowed), same non-zero length; δ in (0, 1).
Result<RdpEpsilon> RdpToEpsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                                double delta, RdpConversion conversion);
// The inverse: δ for a given ε finite >= 0. Classic: δ = exp((α−1)(ε(α) − ε)) (Mironov
// 2017, Prop. 3); improved: δ = exp((α−1)(ε(α) − ε) + α log(1 − 1/α) − log(α − 1))
// (Canonne, Kamath, Steinke 2020, Prop. 12; the same bound as Balle et al. 2020 Thm. 21).
Result<RdpDelta> RdpToDelta(const std::vector<double>& orders, const std::vector<double>& rdp,
                            double epsilon, RdpConversion conversion);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_RDP_H_
