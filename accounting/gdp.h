// Gaussian differential privacy (GDP) and f-DP basics.
//
// Dong, Roth, Su 2019 ("Gaussian differential privacy") define a mechanism to be
// mu-GDP when distinguishing neighbouring datasets is at least as hard as telling
// N(0,1) from N(mu,1). Bu, Dong, Long, Su 2020 ("Deep learning with Gaussian
// differential privacy") apply the central limit theorem of f-DP to NoisySGD:
// mu_CLT = p sqrt(T (e^{1/sigma^2} - 1)) (their eq. 3.1).
//
// Exactness: GdpDelta / GdpEpsilon / GdpMu are exact conversions for a mechanism
// that IS mu-GDP. A mu obtained from CltMu is only the CLT *approximation* of the
// subsampled Gaussian mechanism: it is not an upper bound (it under-reports epsilon
// for most of Bu et al.'s own settings). Every caller that prints a value derived
// from CltMu must label it approximate.
//
// Numerics: every function here is computed in long double with Boost.Math, in
// log space where quantities under- or overflow a double (e^eps Phi(-eps/mu-mu/2)
// at large eps), and roots are found with TOMS 748 on adaptively grown brackets.
#ifndef DPKIT_ACCOUNTING_GDP_H_
#define DPKIT_ACCOUNTING_GDP_H_

#include <cstdint>

#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// Tradeoff function of mu-GDP: G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu), the
// smallest type II error of a level-alpha test of N(0,1) vs N(mu,1)
// (Dong, Roth, Su 2019, Sec. 2; Bu et al. 2020, Sec. 2). Requires mu >= 0 finite
// and alpha in [0, 1]; returns NaN otherwise (a pure function for plotting; the CLI
// validates before calling).
double GaussianTradeoff(double mu, double alpha);

// Tradeoff function of (epsilon, delta)-DP:
// f_{eps,delta}(alpha) = max{0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)}
// (Bu et al. 2020, eq. 2.1; Dong, Roth, Su 2019, Sec. 2). Requires eps >= 0,
// delta in [0,1], alpha in [0,1]; returns NaN otherwise.
double ApproxDpTradeoff(double epsilon, double delta, double alpha);

// delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2): the smallest
// delta such that a mu-GDP mechanism is (eps, delta)-DP (Bu et al. 2020, eq. 3.2;
// Dong, Roth, Su 2019, Cor. 2.13 of the arXiv version = Corollary 1 of the JRSS-B
// version). mu finite > 0, eps finite >= 0.
Result<double> GdpDelta(double mu, double epsilon);

// Natural logarithm of GdpDelta, accurate where delta underflows a double.
Result<double> GdpLogDelta(double mu, double epsilon);

// The inverse of eq. (3.2): the smallest eps >= 0 with GdpDelta(mu, eps) <= delta.
// The returned value is on the safe side: GdpDelta(mu, result) <= delta up to the
// rounding of the final evaluation. mu finite > 0, delta in (0, 1).
Result<double> GdpEpsilon(double mu, double delta);

// The mu for which a mu-GDP mechanism is exactly (eps, delta)-DP, i.e. the largest
// mu with GdpDelta(mu, eps) <= delta (Bu et al. 2020, eq. 3.3: solve eq. 3.2 for mu).
// eps finite >= 0, delta in (0, 1).
Result<double> GdpMu(double epsilon, double delta);

// Analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8 and Alg. 1): the smallest noise
// standard deviation sigma with Phi(Delta/(2 sigma) - eps sigma/Delta) -
// e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta) <= delta. That condition is eq. (3.2) of
// Bu et al. 2020 at mu = Delta/sigma, so sigma = Delta / GdpMu(eps, delta). epsilon finite
// > 0, delta in (0, 1), l2_sensitivity finite > 0. (The mechanism that adds this noise is
// in mechanisms/; its calibration is accounting.)
Result<double> AnalyticGaussianStddev(double epsilon, double delta, double l2_sensitivity);

// CLT approximation of NoisySGD / NoisyAdam with Poisson sampling rate p,
// noise multiplier sigma and T steps: mu_CLT = p sqrt(T (e^{1/sigma^2} - 1))
// (Bu et al. 2020, eq. 3.1). APPROXIMATE, not an upper bound. Errors when
// sampling_rate is outside (0, 1], noise_multiplier is not finite > 0, steps < 1,
// or mu_CLT overflows a double (noise_multiplier far too small).
Result<double> CltMu(double sampling_rate, double noise_multiplier, int64_t steps);

// The reverse problem (Bu et al. 2020, eqs. 3.3-3.4): the noise multiplier sigma~
// whose mu_CLT equals GdpMu(epsilon, delta):
// sigma~ = 1 / sqrt(log(1 + mu^2 / (p^2 T))). APPROXIMATE (CLT), like CltMu.
Result<double> CltNoiseMultiplier(double epsilon, double delta, double sampling_rate,
                                  int64_t steps);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_GDP_H_
