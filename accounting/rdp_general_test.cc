// RDP of the other events: bounded range (the exponential mechanism), the general bound
// for Poisson sampling of any event (Zhu, Wang 2019), the discrete Gaussian, the order grid.
#include "dpkit/accounting/rdp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "boost/math/quadrature/gauss_kronrod.hpp"
#include "boost/multiprecision/cpp_bin_float.hpp"
#include "gtest/gtest.h"
#include "dpkit/accounting/rdp_testing.h"

namespace dpkit::accounting {
namespace {

using testing::Big;
using testing::EpsilonFor;
using testing::IntegerOrderReference;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- bounded range

// D_α(P || Q) of two discrete distributions, directly in 50 digits.
Big RenyiDivergence(const std::vector<Big>& p, const std::vector<Big>& q, double alpha) {
  const Big a = alpha;
  Big sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += pow(p[i], a) * pow(q[i], 1 - a);
  return log(sum) / (a - 1);
}

// The two-output ε-BR pair whose likelihood ratio P/Q takes the values x and x e^ε,
// x in [e^{−ε}, 1] (Q-weights fixed by E_Q[P/Q] = 1), and its D_α.
Big TwoPointBrDivergence(const Big& x, double eps, double alpha) {
  const Big hi = x * exp(Big(eps));
  const Big w = (1 - x) / (hi - x);  // Q-mass on the ratio hi
  return RenyiDivergence({w * hi, (1 - w) * x}, {w, 1 - w}, alpha);
}

// Independent reference: the largest D_α over the two-point ε-BR pairs, by a grid of
// 400 points in x followed by golden-section refinement around the best one.
double WorstTwoPointBrDivergence(double eps, double alpha) {
  const Big lo = exp(Big(-eps));
  const Big width = 1 - lo;
  const int n = 400;
  int best = 1;
  Big best_value = -1;
  for (int i = 1; i < n; ++i) {
    const Big d = TwoPointBrDivergence(lo + width * i / n, eps, alpha);
    if (d > best_value) {
      best_value = d;
      best = i;
    }
  }
  Big a = lo + width * (best - 1) / n, b = lo + width * (best + 1) / n;
  const Big ratio = (sqrt(Big(5)) - 1) / 2;
  for (int it = 0; it < 80; ++it) {
    const Big c = b - ratio * (b - a), d = a + ratio * (b - a);
    if (TwoPointBrDivergence(c, eps, alpha) > TwoPointBrDivergence(d, eps, alpha)) {
      b = d;
    } else {
      a = c;
    }
  }
  return static_cast<double>(std::max(best_value, TwoPointBrDivergence((a + b) / 2, eps, alpha)));
}

// The closed form is the exact worst case: never below the best two-point pair (it must
// be an upper bound) and within 1e-9 relative of it plus the documented rounding
// allowance (64 ulps of the O(max(1, ε)) terms of the cumulant, divided by α − 1; below
// 2e-13 max(1, ε)/(α − 1) at these settings).
TEST(RdpBoundedRangeTest, IsTheWorstCaseTwoPointPair) {
  for (double eps : {1e-3, 0.1, 0.5, 1.0, 3.0, 10.0}) {
    for (double alpha : {1.01, 1.5, 2.0, 4.0, 10.0, 64.0, 1000.0}) {
      const double reference = WorstTwoPointBrDivergence(eps, alpha);
      const double actual = RdpBoundedRange(eps, alpha).value();
      EXPECT_GE(actual, reference * (1 - 1e-12)) << "eps=" << eps << " alpha=" << alpha;
      EXPECT_LE(actual, reference * (1 + 1e-9) + 2e-13 * std::max(1.0, eps) / (alpha - 1))
          << "eps=" << eps << " alpha=" << alpha;
    }
  }
}

// Every ε-BR pair, not only two-point ones, stays below the bound: random pairs with 2 to
// 6 outputs whose log-likelihood ratios span exactly ε (fixed seed; deterministic).
TEST(RdpBoundedRangeTest, BoundsRandomBoundedRangePairs) {
  std::mt19937_64 rng(4711);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const double eps = std::exp(std::log(1e-2) + unit(rng) * std::log(1e3));  // 0.01 .. 10
    const int k = 2 + trial % 5;
    std::vector<Big> q(k), ratio(k);
    Big q_total = 0, mean = 0;
    for (int i = 0; i < k; ++i) {
      q[i] = 0.05 + unit(rng);
      q_total += q[i];
      // Ratios in [1, e^ε], the first and last at the ends so that the range is ε.
      const double t = i == 0 ? 0.0 : (i == 1 ? 1.0 : unit(rng));
      ratio[i] = exp(Big(t * eps));
    }
    for (int i = 0; i < k; ++i) {
      q[i] /= q_total;
      mean += q[i] * ratio[i];
    }
    std::vector<Big> p(k);
    for (int i = 0; i < k; ++i) p[i] = q[i] * ratio[i] / mean;  // P/Q = ratio / E_Q[ratio]
    for (double alpha : {1.5, 2.0, 8.0, 100.0}) {
      const double d = static_cast<double>(RenyiDivergence(p, q, alpha));
      EXPECT_LE(d, RdpBoundedRange(eps, alpha).value() * (1 + 1e-12))
          << "trial " << trial << " eps=" << eps << " alpha=" << alpha;
    }
  }
}

// The exponential mechanism P(i) ∝ exp(ε u_i / (2Δ)) is ε-BR; on neighbouring score
// vectors (each score moved by at most Δ) its divergence stays below the bound.
TEST(RdpBoundedRangeTest, BoundsTheExponentialMechanismOnNeighbouringScores) {
  const double eps = 0.8;
  const std::vector<double> u = {0.0, 0.3, 1.0, 1.0, -2.0};
  const std::vector<double> shift = {1, -1, 1, -1, 0};  // the adversarial direction
  std::vector<Big> p(u.size()), q(u.size());
  Big zp = 0, zq = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    p[i] = exp(Big(eps) * u[i] / 2);
    q[i] = exp(Big(eps) * (u[i] + shift[i]) / 2);
    zp += p[i];
    zq += q[i];
  }
  for (size_t i = 0; i < u.size(); ++i) {
    p[i] /= zp;
    q[i] /= zq;
  }
  for (double alpha : {1.5, 2.0, 10.0, 1000.0}) {
    const double bound = RdpBoundedRange(eps, alpha).value();
    EXPECT_LE(static_cast<double>(RenyiDivergence(p, q, alpha)), bound);
    EXPECT_LE(static_cast<double>(RenyiDivergence(q, p, alpha)), bound);
  }
}

// Tighter than every earlier bound: min(αε²/8, ε) (Cesar & Rogers 2021), which
// mechanisms/selection.cc used, and pure ε-DP (randomized response with ε); not below
// randomized response with ε/2, which is itself ε-BR.
TEST(RdpBoundedRangeTest, LiesBetweenHalfAndFullRandomizedResponseAndBelowZcdp) {
  for (double eps : {1e-6, 1e-3, 0.1, 1.0, 5.0, 30.0}) {
    for (double alpha : {1.01, 1.5, 2.0, 10.0, 1000.0, 20000.0}) {
      const double br = RdpBoundedRange(eps, alpha).value();
      EXPECT_LE(br, std::min(alpha * eps * eps / 8, eps)) << eps << " " << alpha;
      EXPECT_LE(br, RdpPureDp(eps, alpha).value() * (1 + 1e-12)) << eps << " " << alpha;
      EXPECT_GE(br, RdpPureDp(eps / 2, alpha).value() * (1 - 1e-9)) << eps << " " << alpha;
    }
  }
  // Strictly tighter than min(αε²/8, ε) where it matters (large ε, moderate α).
  EXPECT_LT(RdpBoundedRange(3.0, 2.0).value(), 0.9 * std::min(2 * 9.0 / 8, 3.0));
  EXPECT_EQ(RdpBoundedRange(0, 2).value(), 0.0);
  EXPECT_EQ(RdpBoundedRange(-1, 2).error(), "epsilon must be finite and >= 0, got -1");
  EXPECT_FALSE(RdpBoundedRange(1, 1).ok());
}

TEST(RdpBoundedRangeTest, ComputeRdpUsesItAndItsPureDpEpsilonInSampling) {
  const std::vector<double> orders = {1.5, 2, 8, 100};
  const Event br = Event::BoundedRange(0.4).value();
  const std::vector<double> rdp = ComputeRdp(br, orders).value();
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_EQ(rdp[i], RdpBoundedRange(0.4, orders[i]).value());
  }
  // Sampling without replacement uses ε(∞) = ε for a BR event, as for PureDp(ε).
  const Event swor_br = Event::SampledWithoutReplacement(100, 1, br).value();
  const Event swor_pure =
      Event::SampledWithoutReplacement(100, 1, Event::PureDp(0.4).value()).value();
  EXPECT_LE(ComputeRdp(swor_br, {2.0}).value()[0], ComputeRdp(swor_pure, {2.0}).value()[0]);
}

// ---------------------------------------------------------------- general Poisson

// Zhu & Wang 2019, Thm. 6, written out directly in 50 digits.
double ZhuWangReference(double q, const std::vector<double>& inner, int alpha) {
  const Big bq = q;
  Big binom = Big(alpha) * (alpha - 1) / 2;
  Big sum = pow(1 - bq, alpha - 1) * (alpha * bq - bq + 1) +
            binom * bq * bq * pow(1 - bq, alpha - 2) * exp(Big(inner[2]));
  for (int l = 3; l <= alpha; ++l) {
    binom = binom * (alpha - l + 1) / l;
    sum += 3 * binom * pow(bq, l) * pow(1 - bq, alpha - l) * exp((l - 1) * Big(inner[l]));
  }
  return std::min(static_cast<double>(log(sum) / (alpha - 1)), inner[alpha]);
}

// The exact RDP of Poisson-subsampled randomized response with ε (the worst ε-DP
// mechanism), both directions: D_α((1−q)P0 + qP1 || P0) and D_α(P0 || (1−q)P0 + qP1).
double SubsampledRandomizedResponse(double q, double eps, double alpha) {
  const Big p = exp(Big(eps)) / (1 + exp(Big(eps)));
  const Big bq = q;  // 1 − q in 50 digits: a rounded 1 − q would unbalance the masses
  const std::vector<Big> p0 = {p, 1 - p};
  const std::vector<Big> mix = {(1 - bq) * p + bq * (1 - p), (1 - bq) * (1 - p) + bq * p};
  return static_cast<double>(
      std::max(RenyiDivergence(mix, p0, alpha), RenyiDivergence(p0, mix, alpha)));
}

TEST(RdpPoissonGeneralTest, MatchesTheTheoremWrittenOutDirectly) {
  std::vector<double> inner(65, 0.0);
  for (int l = 2; l <= 64; ++l) inner[l] = l / 2.0 + 3 * RdpBoundedRange(0.2, l).value();
  for (double q : {1e-6, 1e-3, 0.05, 0.5}) {
    for (int alpha : {2, 3, 7, 64}) {
      const double expected = ZhuWangReference(q, inner, alpha);
      EXPECT_NEAR(RdpPoissonSubsampledUpperBound(q, inner, alpha).value(), expected,
                  1e-12 * expected)
          << "q=" << q << " alpha=" << alpha;
    }
  }
  EXPECT_EQ(RdpPoissonSubsampledUpperBound(1.0, inner, 10).value(), inner[10]);
}

// For a Gaussian inner mechanism the general bound is above the exact subsampled
// Gaussian RDP, equal to it at α = 2 (where the theorem has no factor 3 and the exact
// value is log(1 + q²(e^{1/σ²} − 1))), and close to it for small q.
TEST(RdpPoissonGeneralTest, IsAboveAndNearTheExactSubsampledGaussian) {
  for (double sigma : {1.0, 2.0, 5.0}) {
    std::vector<double> inner(33, 0.0);
    for (int l = 2; l <= 32; ++l) inner[l] = l / (2 * sigma * sigma);
    for (double q : {1e-3, 1e-2, 0.1}) {
      for (int alpha : {2, 3, 4, 8, 16, 32}) {
        const double exact = IntegerOrderReference(q, sigma, alpha);
        const double general = RdpPoissonSubsampledUpperBound(q, inner, alpha).value();
        EXPECT_GE(general, exact * (1 - 1e-12)) << sigma << " " << q << " " << alpha;
        if (alpha == 2) { EXPECT_NEAR(general, exact, 1e-12 * exact); }
        // Measured ratios at q = 1e-3, α <= 8: at most 1.11 (σ = 5, α = 8).
        if (q == 1e-3 && alpha <= 8) { EXPECT_LE(general, 1.12 * exact); }
      }
    }
  }
}

// For a pure-DP inner event the subsampled pair is explicit (randomized response mixed
// with its swap): ComputeRdp must bound its exact divergence in both directions, equal it
// at α = 2 and stay within the measured factors elsewhere.
TEST(RdpPoissonGeneralTest, BoundsTheExactSubsampledRandomizedResponse) {
  for (double eps : {0.1, 1.0, 3.0}) {
    for (double q : {1e-3, 1e-2, 0.1}) {
      const Event e = Event::PoissonSampled(q, Event::PureDp(eps).value()).value();
      const std::vector<double> orders = {1.5, 2, 2.5, 3, 8, 32};
      const std::vector<double> rdp = ComputeRdp(e, orders).value();
      for (size_t i = 0; i < orders.size(); ++i) {
        const double exact = SubsampledRandomizedResponse(q, eps, orders[i]);
        EXPECT_GE(rdp[i], exact * (1 - 1e-12)) << eps << " " << q << " " << orders[i];
        if (orders[i] == 2) { EXPECT_NEAR(rdp[i], exact, 1e-12 * exact); }
        // Measured: the bound is at most 2.8 times the exact value at these settings (the
        // worst is ε = 3, q = 1e-2, α = 8 and ε = 0.1, q = 0.1, α = 2.5 among them).
        EXPECT_LE(rdp[i], 3.0 * exact) << eps << " " << q << " " << orders[i];
      }
    }
  }
}

// The sparse DP-SGD step event: PoissonSampled(q, Composed{SelfComposed(BR(ε0), k),
// Gaussian(z)}) is accountable; integer orders follow the theorem with the inner
// composition's RDP, fractional ones interpolate the cumulant.
TEST(RdpPoissonGeneralTest, AccountsTheSparseDpSgdStepEvent) {
  const double q = 0.01, z = 1.2, eps0 = 0.05;
  const int k = 16;
  const Event inner =
      Event::Composed({Event::SelfComposed(Event::BoundedRange(eps0).value(), k).value(),
                       Event::Gaussian(z).value()})
          .value();
  const Event step = Event::PoissonSampled(q, inner).value();
  std::vector<double> inner_rdp(13, 0.0);
  for (int l = 2; l <= 12; ++l) {
    inner_rdp[l] = l / (2 * z * z) + k * RdpBoundedRange(eps0, l).value();
  }
  const std::vector<double> rdp = ComputeRdp(step, {2, 7, 12, 6.25}).value();
  for (int i = 0; i < 3; ++i) {
    const int alpha = i == 0 ? 2 : (i == 1 ? 7 : 12);
    const double expected = ZhuWangReference(q, inner_rdp, alpha);
    EXPECT_NEAR(rdp[i], expected, 1e-12 * expected) << alpha;
  }
  const double interpolated = (0.75 * 5 * ZhuWangReference(q, inner_rdp, 6) +
                               0.25 * 6 * ZhuWangReference(q, inner_rdp, 7)) /
                              5.25;
  EXPECT_NEAR(rdp[3], interpolated, 1e-12 * interpolated);
  // And it is far below the unsampled inner mechanism.
  EXPECT_LT(rdp[1], 0.01 * ComputeRdp(inner, {7}).value()[0]);
  // Through the whole pipeline: T steps convert to a finite epsilon.
  const Event run = Event::SelfComposed(step, 1000).value();
  const double eps = EpsilonFor(run, 1e-5, RdpConversion::kImproved);
  EXPECT_GT(eps, 0.0);
  EXPECT_LT(eps, 10.0);
}

TEST(RdpPoissonGeneralTest, LaplaceInnerIsBelowTheUnsampledMechanismAndAmplifiedPureDp) {
  const Event lap = Event::Laplace(2).value();
  const Event sampled = Event::PoissonSampled(0.05, lap).value();
  const std::vector<double> orders = {1.25, 2, 5, 40};
  const std::vector<double> rdp = ComputeRdp(sampled, orders).value();
  const double amplified = std::log1p(0.05 * std::expm1(0.5));  // Laplace(2) is 0.5-DP
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_LE(rdp[i], RdpLaplace(2, orders[i]).value());
    EXPECT_LE(rdp[i], RdpPureDp(amplified, orders[i]).value() * (1 + 1e-12));
    EXPECT_GT(rdp[i], 0.0);
  }
}

TEST(RdpPoissonGeneralTest, RejectsBadInputs) {
  const std::vector<double> inner = {0, 0, 1, 1.5};
  EXPECT_EQ(RdpPoissonSubsampledUpperBound(0, inner, 3).error(),
            "sampling_rate must be in (0, 1], got 0");
  EXPECT_FALSE(RdpPoissonSubsampledUpperBound(0.1, inner, 1).ok());
  EXPECT_FALSE(RdpPoissonSubsampledUpperBound(0.1, inner, 4).ok());  // too few entries
  EXPECT_FALSE(RdpPoissonSubsampledUpperBound(0.1, {0, 0, -1, 1}, 3).ok());
  const Event sampled = Event::PoissonSampled(0.1, Event::PureDp(1).value()).value();
  EXPECT_FALSE(ComputeRdp(sampled, {2e6}).ok());
}

TEST(RdpTest, DefaultOrdersCoverNearOneToBeyondTenThousand) {
  const std::vector<double> orders = DefaultRdpOrders();
  EXPECT_TRUE(std::is_sorted(orders.begin(), orders.end()));
  EXPECT_EQ(std::adjacent_find(orders.begin(), orders.end()), orders.end());
  EXPECT_GT(orders.front(), 1.0);
  EXPECT_LE(orders.front(), 1.01);
  EXPECT_GE(orders.back(), 1e4);
  for (double a = 2; a <= 64; ++a) {
    EXPECT_TRUE(std::binary_search(orders.begin(), orders.end(), a)) << a;
  }
  const std::vector<double> tf = TfPrivacyOrders();
  ASSERT_EQ(tf.size(), 99u + 52u);
  EXPECT_DOUBLE_EQ(tf.front(), 1.1);
  EXPECT_DOUBLE_EQ(tf[98], 10.9);
  EXPECT_EQ(tf[99], 12.0);
  EXPECT_EQ(tf.back(), 63.0);
}

// ---------------------------------------------------------------- discrete Gaussian

// Brute-force Rényi divergence D_α(P‖Q) of laws on the integers [-n, n + d] in long
// double: 1/(α−1) log Σ_x P(x)^α Q(x)^{1−α}, summed from the smallest terms up.
long double RenyiByBruteForce(const std::vector<long double>& p,
                              const std::vector<long double>& q, long double alpha) {
  std::vector<long double> terms;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    terms.push_back(std::exp(alpha * std::log(p[i]) + (1 - alpha) * std::log(q[i])));
  }
  std::sort(terms.begin(), terms.end());
  long double sum = 0;
  for (long double t : terms) sum += t;
  return std::log(sum) / (alpha - 1);
}

// N_Z(shift, s^2) on [-n, n + d]. The order-α sum is centred at x = (1 - α) d (its terms
// are e^{α(α-1)d²/(2s²)} e^{-(x-(1-α)d)²/(2s²)} / Z), so n = 30 s + 32 d + 10 leaves out
// less than e^{-450} of it for α <= 32.
std::vector<long double> DiscreteGaussianLaw(long double sigma, int64_t n, int64_t d,
                                             int64_t shift) {
  std::vector<long double> out;
  long double z = 0;
  for (int64_t x = -4 * n; x <= 4 * n; ++x) z += std::exp(-x * x / (2 * sigma * sigma));
  for (int64_t x = -n; x <= n + d; ++x) {
    const long double y = static_cast<long double>(x - shift);
    out.push_back(std::exp(-y * y / (2 * sigma * sigma)) / z);
  }
  return out;
}

// CKS 2020, Thm. 4 / Prop. 5: the RDP of the discrete Gaussian is α D²/(2 s²), checked
// against the divergence summed over the integers: equal at integer orders (tolerance
// 1e-9 relative: a long double sum of ~1e3 terms and the log), at most it at fractional
// ones (the shifted theta sum is below Z), in both orders of the pair.
TEST(RdpDiscreteGaussianTest, IsAlphaDeltaSquaredOverTwoSigmaSquared) {
  struct Case { double sigma; int64_t d; };
  for (const Case& c : {Case{0.5, 1}, Case{1.0, 1}, Case{2.5, 3}, Case{7.0, 2}}) {
    const std::vector<double> orders = {1.5, 2, 2.75, 3, 8, 16.5, 32};
    const std::vector<double> rdp =
        ComputeRdp(Event::DiscreteGaussian(c.sigma, c.d).value(), orders).value();
    const int64_t n = static_cast<int64_t>(30 * c.sigma) + 32 * c.d + 10;
    const auto a = DiscreteGaussianLaw(c.sigma, n, c.d, 0);
    const auto b = DiscreteGaussianLaw(c.sigma, n, c.d, c.d);
    for (size_t i = 0; i < orders.size(); ++i) {
      const double closed = orders[i] * c.d * c.d / (2 * c.sigma * c.sigma);
      EXPECT_NEAR(rdp[i], closed, 1e-15 * closed) << c.sigma << " " << orders[i];
      for (const auto* pair : {&a, &b}) {
        const auto& p = *pair;
        const auto& q = pair == &a ? b : a;
        const long double exact = RenyiByBruteForce(p, q, orders[i]);
        EXPECT_LE(exact, rdp[i] * (1 + 1e-9)) << c.sigma << " " << orders[i];
        if (orders[i] == std::floor(orders[i])) {
          EXPECT_NEAR(static_cast<double>(exact), rdp[i], 1e-9 * rdp[i])
              << c.sigma << " " << orders[i];
        }
      }
    }
  }
}

// Poisson sampling goes through the general bound (Zhu & Wang 2019, Thm. 6) on the
// discrete Gaussian's RDP curve, never the continuous subsampled-Gaussian series: the
// value equals RdpPoissonSubsampledUpperBound on that curve, and it bounds the exact
// divergence of the subsampled discrete pair ((1−q)A + qB vs A, both orders), summed
// over the integers.
TEST(RdpDiscreteGaussianTest, PoissonSamplingUsesTheGeneralBoundAndBoundsTheTruePair) {
  const double sigma = 1.5, q = 0.05;
  const int64_t d = 1;
  const Event event =
      Event::PoissonSampled(q, Event::DiscreteGaussian(sigma, d).value()).value();
  const std::vector<double> orders = {2, 3, 4, 8, 16};
  const std::vector<double> rdp = ComputeRdp(event, orders).value();
  std::vector<double> inner(17, 0.0);
  for (int l = 2; l <= 16; ++l) inner[l] = l * d * d / (2 * sigma * sigma);
  const int64_t n = 100;
  const auto a = DiscreteGaussianLaw(sigma, n, d, 0);
  const auto b = DiscreteGaussianLaw(sigma, n, d, d);
  std::vector<long double> mix(a.size());
  for (size_t i = 0; i < a.size(); ++i) mix[i] = (1 - q) * a[i] + q * b[i];
  for (size_t i = 0; i < orders.size(); ++i) {
    const int alpha = static_cast<int>(orders[i]);
    const double general = RdpPoissonSubsampledUpperBound(q, inner, alpha).value();
    EXPECT_NEAR(rdp[i], general, 1e-13 * general) << alpha;
    const long double remove = RenyiByBruteForce(mix, a, orders[i]);
    const long double add = RenyiByBruteForce(a, mix, orders[i]);
    EXPECT_LE(remove, rdp[i] * (1 + 1e-9)) << alpha;
    EXPECT_LE(add, rdp[i] * (1 + 1e-9)) << alpha;
    // And it amplifies: below the unsampled curve.
    EXPECT_LT(rdp[i], inner[alpha]) << alpha;
  }
}

}  // namespace
}  // namespace dpkit::accounting
