// The general central limit theorem of f-DP for heterogeneous compositions (Dong, Roth,
// Su 2019, Thms. 3.4-3.5; the CLT Bu, Dong, Long, Su 2020 state in Sec. 2 and apply to
// NoisySGD): when every component's tradeoff function f_i is close to the identity,
// f_1 (x) ... (x) f_n is approximately G_mu with
//   mu = 2 K / s,  K = sum_i kl(f_i),  s^2 = sum_i (kappa2(f_i) - kl(f_i)^2),
// kl(f) = -int_0^1 log|f'(x)| dx, kappa2(f) = int_0^1 log^2|f'(x)| dx (DRS 2019, Sec. 3.2;
// the centred s^2 of their finite-n Thm. 3.4, which tends to the sum of the kappa2 of
// Thm. 3.5 when every kl_i -> 0).
//
// One NoisySGD step with Poisson rate p and noise multiplier z is taken as
// f_p = p G_{1/z} + (1 - p) Id = T(P, Q) with P = N(0, 1), Q = (1 - p) N(0, 1) +
// p N(1/z, 1) (Bu et al. 2020, Sec. 3), so kl(f_p) = KL(P || Q), kappa2 =
// E_P[log^2(dQ/dP)], kappa3 = E_P|log(dQ/dP)|^3; or as its inverse f_p^{-1} = T(Q, P)
// (the other direction of adjacency), with the roles of P and Q swapped. Subsampling's
// symmetrised min{f_p, f_p^{-1}}** lies below both; the two directions' mu differ
// where p e^{1/z^2} is not small, and GeneralCltMu reports the larger (the less private
// direction, as the PLD accountant does). The functionals are one-dimensional
// expectations under N(0, 1), computed by adaptive Gauss-Kronrod quadrature in long
// double. For a
// homogeneous composition mu tends to Bu et al.'s mu_CLT = p sqrt(T (e^{1/z^2} - 1))
// (their eq. 3.1) as T grows with p sqrt(T) fixed; for a heterogeneous one (a noise or
// batch-size schedule) it is the CLT's answer without that closed form.
//
// APPROXIMATE: a limit theorem, not an upper bound (like CltMu, it under-reports epsilon
// in many of Bu et al.'s settings). Every caller that prints mu, or a value derived from
// it, labels it approximate and shows a certified accountant's value beside it.
#ifndef DPKIT_ACCOUNTING_GDP_GENERAL_CLT_H_
#define DPKIT_ACCOUNTING_GDP_GENERAL_CLT_H_

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// The functionals of DRS 2019, Sec. 3.2, of one tradeoff function (or their sums over a
// composition).
struct CltFunctionals {
  double kl = 0;      // -int log|f'|
  double kappa2 = 0;  // int log^2|f'|
  double kappa3 = 0;  // int |log|f'||^3
  double kl_squared = 0;  // sum of kl_i^2 (for the centred s^2)
};

enum class CltDirection {
  kPQ,  // f_p = T(P, Q): the functionals are expectations under P = N(0, 1)
  kQP,  // f_p^{-1} = T(Q, P): under the mixture Q
};

// The functionals of one NoisySGD step (f_p or f_p^{-1} above). sampling_rate in (0, 1],
// noise_multiplier finite in [0.05, 1e6] (below, the quadrature's range of the loss is
// exceeded).
Result<CltFunctionals> NoisySgdStepFunctionals(double sampling_rate, double noise_multiplier,
                                               CltDirection direction = CltDirection::kPQ);

struct GeneralClt {
  double mu;  // 2 K / s of the direction with the larger mu: APPROXIMATE
  CltFunctionals sums;  // that direction's sums
  CltDirection direction;
};

// mu of the general CLT for an event tree of Gaussian (p = 1), PoissonSampled(p,
// Gaussian), SelfComposed and Composed events (the shapes of a DP-SGD run with any noise
// and sampling-rate schedule). Errors name any other event kind.
Result<GeneralClt> GeneralCltMu(const Event& event);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_GDP_GENERAL_CLT_H_
