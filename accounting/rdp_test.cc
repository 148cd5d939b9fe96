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

double Rdp(double q, double sigma, double order) {
  Result<double> r = RdpPoissonSubsampledGaussian(q, sigma, order);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r : std::nan("");
}

// Tolerance 1e-12 relative: the implementation accumulates log C(α,k) over up to 256 steps
// (~1e-14 relative error per term) and the reference is exact to ~1e-40.
TEST(RdpTest, IntegerOrderMatchesBinomialSumInExtendedPrecision) {
  for (double q : {1e-12, 1e-6, 1e-3, 0.01, 0.1, 0.5, 0.99}) {
    for (double sigma : {0.5, 1.0, 2.0, 10.0}) {
      for (int alpha : {2, 3, 5, 10, 32, 64, 256}) {
        const double expected = IntegerOrderReference(q, sigma, alpha);
        EXPECT_NEAR(Rdp(q, sigma, alpha), expected, 1e-12 * expected)
            << "q=" << q << " sigma=" << sigma << " alpha=" << alpha;
      }
    }
  }
}

// Independent reference for fractional orders: A_α − 1 = E_{z~N(0,σ²)}[(1+x)^α − 1 − αx]
// with x = q(L(z) − 1), L(z) = exp((2z − 1)/(2σ²)) (the definition of A_α; E[L] = 1),
// integrated by adaptive Gauss–Kronrod. The integrand is evaluated in long double, by its
// binomial series Σ_{n>=2} C(α,n) x^n when |x| < 0.1 (40 terms: remainder < 1e-40) and
// directly otherwise, so it has no cancellation.
double FractionalOrderReference(double q, double sigma, double alpha) {
  const long double a = alpha;
  const long double s2 = static_cast<long double>(sigma) * sigma;
  const long double norm = 1 / (sigma * std::sqrt(2 * 3.14159265358979323846264338L));
  auto integrand = [&](double z) -> double {
    const long double lz = z;
    const long double x = q * std::expm1((2 * lz - 1) / (2 * s2));
    const long double log_density = std::log(norm) - lz * lz / (2 * s2);
    if (x > 1) {  // log space: f = (1+x)^α (1 − (1 + αx)/(1+x)^α)
      const long double log_power = a * std::log1p(x);
      return static_cast<double>(std::exp(
          log_density + log_power + std::log1p(-std::exp(std::log1p(a * x) - log_power))));
    }
    long double f = 0;
    if (std::fabs(x) < 0.1L) {
      long double coefficient = a * (a - 1) / 2;  // C(α, 2)
      long double power = x * x;
      for (int n = 2; n < 42; ++n) {
        f += coefficient * power;
        coefficient *= (a - n) / (n + 1);
        power *= x;
      }
    } else {
      f = std::expm1(a * std::log1p(x)) - a * x;
    }
    return static_cast<double>(std::exp(log_density) * f);
  };
  // Outside [−40σ, α + 40σ] the integrand is below e^{−800} of its peak (it is a Gaussian
  // density times a factor growing at most like e^{α(2z−1)/(2σ²)}, peaked near z = α).
  const double a_minus_one = boost::math::quadrature::gauss_kronrod<double, 61>::integrate(
      integrand, -40 * sigma, alpha + 40 * sigma, 15, 1e-13);
  return std::log1p(a_minus_one) / (alpha - 1);
}

// Tolerance 1e-8 relative: the quadrature is asked for 1e-13 and the series stops when
// its tail bound is below 1e-10 of A_α − 1 (and then adds that bound).
TEST(RdpTest, FractionalOrderMatchesNumericalIntegration) {
  for (double q : {1e-6, 1e-3, 0.05, 0.5, 0.9}) {
    for (double sigma : {0.8, 1.0, 2.0, 5.0}) {
      for (double alpha : {1.01, 1.1, 1.5, 2.5, 4.75, 10.5}) {
        const double expected = FractionalOrderReference(q, sigma, alpha);
        const double actual = Rdp(q, sigma, alpha);
        EXPECT_NEAR(actual, expected, 1e-8 * expected)
            << "q=" << q << " sigma=" << sigma << " alpha=" << alpha;
        // The series result is an upper bound up to the quadrature's own error.
        EXPECT_GE(actual, expected * (1 - 1e-10));
      }
    }
  }
}

// As q → 0, ε(α) = α q² (e^{1/σ²} − 1)/2 + O(q³) for every α (the k = 2 / i = 2 term);
// at q = 1e-9 the relative size of the O(q³) remainder is below 1e-7.
TEST(RdpTest, TinySamplingRateKeepsFullPrecision) {
  const double q = 1e-9;
  for (double sigma : {0.8, 1.0, 3.0}) {
    for (double alpha : {1.01, 1.3, 2.0, 2.5, 7.0, 7.25}) {
      const double expected = alpha * q * q * std::expm1(1 / (sigma * sigma)) / 2;
      EXPECT_NEAR(Rdp(q, sigma, alpha), expected, 1e-6 * expected)
          << "sigma=" << sigma << " alpha=" << alpha;
    }
  }
}

TEST(RdpTest, FullSamplingIsTheGaussianMechanism) {
  for (double sigma : {0.3, 1.0, 7.0}) {
    for (double alpha : {1.01, 1.5, 2.0, 17.0, 1e4}) {
      EXPECT_DOUBLE_EQ(Rdp(1.0, sigma, alpha), alpha / (2 * sigma * sigma));
      const Event e = Event::PoissonSampled(1.0, Event::Gaussian(sigma).value()).value();
      EXPECT_DOUBLE_EQ(ComputeRdp(e, {alpha}).value()[0], alpha / (2 * sigma * sigma));
    }
  }
}

// Sampling at rate q < 1 is never worse than no sampling, and approaches it as q → 1.
TEST(RdpTest, SampledIsBelowUnsampledAndApproachesItAsRateGoesToOne) {
  for (double alpha : {1.05, 2.0, 3.5, 64.0}) {
    const double gaussian = alpha / 2;  // σ = 1
    EXPECT_LE(Rdp(0.999999, 1.0, alpha), gaussian * (1 + 1e-12));
    EXPECT_NEAR(Rdp(0.999999, 1.0, alpha), gaussian, 1e-4 * gaussian);
  }
}

// At huge α the result stays finite and within analytic bounds: the single k = α term
// gives (α−1) ε(α) >= α log q + (α² − α)/(2σ²), and sampling never hurts: ε(α) <= α/(2σ²).
TEST(RdpTest, HugeOrdersDoNotOverflow) {
  const double q = 0.01;
  const double sigma = 0.5;
  for (double alpha : {1e4, 2e4, 1e5, 1e5 + 0.5}) {
    const double rdp = Rdp(q, sigma, alpha);
    ASSERT_TRUE(std::isfinite(rdp)) << alpha;
    const double lower = (alpha * std::log(q) + (alpha * alpha - alpha) / (2 * sigma * sigma)) /
                         (alpha - 1);
    EXPECT_GE(rdp, lower * (1 - 1e-12)) << alpha;
    EXPECT_LE(rdp, alpha / (2 * sigma * sigma)) << alpha;
  }
  EXPECT_TRUE(std::isfinite(Rdp(0.5, 100.0, 1e5)));
  EXPECT_TRUE(std::isfinite(Rdp(1e-6, 0.1, 2e4)));
}

// The fractional-order series (Sec. 3.3) and the integer-order sum (Sec. 3.2) are
// separate code paths; just above an integer they must agree. ε(α) is smooth in α with
// slope below 10 here, so a shift of 1e-9 in the order moves it by < 1e-8.
TEST(RdpTest, FractionalSeriesAgreesWithIntegerSumJustAboveAnInteger) {
  for (double q : {1e-4, 0.01, 0.3}) {
    for (double sigma : {0.7, 1.5}) {
      for (double alpha : {2.0, 3.0, 10.0}) {
        const double integer = Rdp(q, sigma, alpha);
        EXPECT_NEAR(Rdp(q, sigma, alpha + 1e-9), integer, 1e-8 + 1e-9 * integer)
            << "q=" << q << " sigma=" << sigma << " alpha=" << alpha;
      }
    }
  }
}

TEST(RdpTest, FractionalValuesLieBetweenNeighbouringIntegers) {
  // Rényi divergence is nondecreasing in the order.
  for (double q : {0.001, 0.1}) {
    for (double sigma : {0.7, 2.0}) {
      EXPECT_LE(Rdp(q, sigma, 2.0), Rdp(q, sigma, 2.5));
      EXPECT_LE(Rdp(q, sigma, 2.5), Rdp(q, sigma, 3.0));
      EXPECT_LE(Rdp(q, sigma, 1.01), Rdp(q, sigma, 1.5));
      EXPECT_LE(Rdp(q, sigma, 1.5), Rdp(q, sigma, 2.0));
    }
  }
}

TEST(RdpTest, NonConvergedSeriesIsAnErrorAndAnInfiniteOrderNeverADroppedOne) {
  Result<double> r = RdpPoissonSubsampledGaussianWithTermLimit(0.5, 5.0, 1.01, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("did not converge within 10 terms"), std::string::npos) << r.error();

  const std::vector<double> orders = {1.01, 2.0, 3.0};
  const Event e = DpSgdEvent(0.5, 5.0, 10).value();
  Result<std::vector<double>> rdp = ComputeRdpWithTermLimit(e, orders, 10);
  ASSERT_TRUE(rdp.ok()) << rdp.error();
  ASSERT_EQ(rdp->size(), 3u);
  EXPECT_EQ((*rdp)[0], kInf);
  EXPECT_TRUE(std::isfinite((*rdp)[1]));
  // The conversion skips the +inf order and reports a finite order that attains ε.
  Result<RdpEpsilon> eps = RdpToEpsilon(orders, *rdp, 1e-5, RdpConversion::kImproved);
  ASSERT_TRUE(eps.ok());
  EXPECT_NE(eps->order, 1.01);
  EXPECT_TRUE(std::isfinite(eps->epsilon));
}

// Huge noise: A_α − 1 ~ q² α² / (2σ²) lies far below the rounding of sums near 1, so the
// series stops at the rounding floor with the unsampled Gaussian's bound instead of running
// to the term limit (issue 21: 2e6 terms per fractional order, seconds per curve at
// σ = 1e8, which made `dpkit calibrate --solve_for=steps --noise_multiplier=1e308` run
// for minutes). Still an upper bound: at least the integer-order neighbour's value below
// it (RDP is nondecreasing in the order).
TEST(RdpTest, FractionalSeriesStopsAtTheRoundingFloorForHugeNoise) {
  for (double sigma : {1e4, 1e8, 1e308}) {
    Result<double> r = RdpPoissonSubsampledGaussianWithTermLimit(0.01, sigma, 2.5, 1000);
    ASSERT_TRUE(r.ok()) << sigma << ": " << r.error();
    Result<double> below = RdpPoissonSubsampledGaussian(0.01, sigma, 2.0);
    Result<double> above = RdpPoissonSubsampledGaussian(0.01, sigma, 3.0);
    ASSERT_TRUE(below.ok() && above.ok());
    EXPECT_GE(*r, *below) << sigma;
    // Below order 3's value where the series resolves A_α − 1 (σ 1e4), else at most
    // log(1 + q (e^{α(α−1)/(2σ²)} − 1)) / (α − 1) ~ q α / (2σ²).
    if (sigma == 1e4) {
      EXPECT_LE(*r, *above * (1 + 1e-6)) << sigma;
    } else {
      EXPECT_LE(*r, 0.01 * 2.5 / (2 * sigma * sigma) * (1 + 1e-12)) << sigma;
    }
  }
}

// TensorFlow Privacy's compute_dp_sgd_privacy examples (its README / tutorials), with
// its order grid. Both published figures match the improved conversion (Balle et al. 2020
// Thm. 21, which TF Privacy adopted) to all 10 printed digits; the classic conversion
// gives the larger figures 0.9418705672 and 1.7092873370 (recorded here so that a change
// in either conversion is caught). Tolerance 1e-9: the published values are rounded to
// 10 decimals.
TEST(RdpTest, ReproducesTensorFlowPrivacyPublishedExamples) {
  const std::vector<double> orders = TfPrivacyOrders();
  // n = 60000, b = 150, σ = 1.3, 15 epochs: q = b/n, steps = epochs·n/b.
  const Event mnist = DpSgdEvent(150.0 / 60000, 1.3, 15 * 60000 / 150).value();
  EXPECT_NEAR(EpsilonFor(mnist, 1e-5, RdpConversion::kImproved, orders), 0.7242234026, 1e-9);
  EXPECT_NEAR(EpsilonFor(mnist, 1e-5, RdpConversion::kClassic, orders), 0.9418705672, 1e-9);
  // n = 1e5, b = 100, σ = 1.0, 30 epochs.
  const Event big = DpSgdEvent(100.0 / 1e5, 1.0, 30 * 100000 / 100).value();
  EXPECT_NEAR(EpsilonFor(big, 1e-7, RdpConversion::kImproved, orders), 1.4154988495, 1e-9);
  EXPECT_NEAR(EpsilonFor(big, 1e-7, RdpConversion::kClassic, orders), 1.7092873370, 1e-9);
}

// The reported order is the one that attains the minimum.
TEST(RdpTest, ReportsTheOptimalOrder) {
  const std::vector<double> orders = TfPrivacyOrders();
  const Event mnist = DpSgdEvent(150.0 / 60000, 1.3, 6000).value();
  const std::vector<double> rdp = ComputeRdp(mnist, orders).value();
  const RdpEpsilon best = RdpToEpsilon(orders, rdp, 1e-5, RdpConversion::kImproved).value();
  EXPECT_EQ(best.order, 19.0);
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_GE(RdpToEpsilon({orders[i]}, {rdp[i]}, 1e-5, RdpConversion::kImproved)->epsilon,
              best.epsilon);
  }
}

TEST(RdpTest, EpsilonIsMonotoneInRateNoiseStepsAndDelta) {
  const auto eps = [](double q, double sigma, int64_t steps, double delta) {
    return EpsilonFor(DpSgdEvent(q, sigma, steps).value(), delta, RdpConversion::kImproved);
  };
  double previous = 0;
  for (double q : {1e-4, 1e-3, 0.01, 0.05, 0.2, 0.7, 1.0}) {
    const double e = eps(q, 1.1, 1000, 1e-5);
    EXPECT_GT(e, previous) << "q=" << q;
    previous = e;
  }
  previous = kInf;
  for (double sigma : {0.5, 0.7, 1.0, 1.5, 3.0, 10.0}) {
    const double e = eps(0.01, sigma, 1000, 1e-5);
    EXPECT_LT(e, previous) << "sigma=" << sigma;
    previous = e;
  }
  previous = 0;
  for (int64_t steps : {1, 10, 100, 1000, 10000, 100000}) {
    const double e = eps(0.01, 1.1, steps, 1e-5);
    EXPECT_GT(e, previous) << "steps=" << steps;
    previous = e;
  }
  previous = kInf;
  for (double delta : {1e-12, 1e-9, 1e-6, 1e-3, 0.1}) {
    const double e = eps(0.01, 1.1, 1000, delta);
    EXPECT_LT(e, previous) << "delta=" << delta;
    previous = e;
  }
}

// log((α−1)/α) − log(α)/(α−1) < 0 for every α > 1, so the improved ε is at most the
// classic one at every order, hence at the optimum too.
TEST(RdpTest, ImprovedConversionNeverExceedsClassic) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  const std::vector<double> orders = DefaultRdpOrders();
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> rdp;
    for (size_t i = 0; i < orders.size(); ++i) rdp.push_back(10 * unit(rng) * unit(rng));
    const double delta = std::pow(10.0, -1 - 14 * unit(rng));
    EXPECT_LE(RdpToEpsilon(orders, rdp, delta, RdpConversion::kImproved)->epsilon,
              RdpToEpsilon(orders, rdp, delta, RdpConversion::kClassic)->epsilon);
    const double epsilon = 5 * unit(rng);
    EXPECT_LE(RdpToDelta(orders, rdp, epsilon, RdpConversion::kImproved)->delta,
              RdpToDelta(orders, rdp, epsilon, RdpConversion::kClassic)->delta);
  }
}

TEST(RdpTest, ConversionsMatchTheirFormulasAtOneOrder) {
  // α = 2, ε(α) = 0.5, δ = 1e-5.
  const double classic = 0.5 + std::log(1e5);
  const double improved = 0.5 + std::log(0.5) - (std::log(1e-5) + std::log(2.0));
  EXPECT_NEAR(RdpToEpsilon({2}, {0.5}, 1e-5, RdpConversion::kClassic)->epsilon, classic, 1e-14);
  EXPECT_NEAR(RdpToEpsilon({2}, {0.5}, 1e-5, RdpConversion::kImproved)->epsilon, improved,
              1e-14);
  // And the inverse returns δ.
  EXPECT_NEAR(RdpToDelta({2}, {0.5}, classic, RdpConversion::kClassic)->delta, 1e-5, 1e-18);
  EXPECT_NEAR(RdpToDelta({2}, {0.5}, improved, RdpConversion::kImproved)->delta, 1e-5, 1e-18);
  // ε below zero is clipped to 0; δ above one to 1.
  EXPECT_EQ(RdpToEpsilon({2}, {0.0}, 0.9, RdpConversion::kImproved)->epsilon, 0.0);
  EXPECT_EQ(RdpToDelta({2}, {50.0}, 0.0, RdpConversion::kClassic)->delta, 1.0);
}

TEST(RdpTest, DeltaAndEpsilonConversionsAreInverse) {
  const std::vector<double> orders = DefaultRdpOrders();
  const std::vector<double> rdp = ComputeRdp(DpSgdEvent(0.004, 0.9, 5000).value(), orders).value();
  for (RdpConversion c : {RdpConversion::kClassic, RdpConversion::kImproved}) {
    for (double delta : {1e-3, 1e-6, 1e-10}) {
      const RdpEpsilon eps = RdpToEpsilon(orders, rdp, delta, c).value();
      const RdpDelta back = RdpToDelta(orders, rdp, eps.epsilon, c).value();
      EXPECT_NEAR(back.delta, delta, 1e-9 * delta) << RdpConversionName(c);
      EXPECT_EQ(back.order, eps.order);
    }
  }
}

TEST(RdpTest, ConversionsRejectBadInputs) {
  const RdpConversion c = RdpConversion::kClassic;
  EXPECT_EQ(RdpToEpsilon({}, {}, 1e-5, c).error(), "orders must be non-empty");
  EXPECT_EQ(RdpToEpsilon({2, 3}, {1}, 1e-5, c).error(),
            "orders and rdp must have the same length, got 2 and 1");
  EXPECT_EQ(RdpToEpsilon({1}, {1}, 1e-5, c).error(), "order must be finite and > 1, got 1");
  EXPECT_EQ(RdpToEpsilon({kInf}, {1}, 1e-5, c).error(),
            "order must be finite and > 1, got inf");
  EXPECT_EQ(RdpToEpsilon({2}, {-1}, 1e-5, c).error(),
            "rdp values must be >= 0 (+inf allowed), got -1 at order 2");
  EXPECT_EQ(RdpToEpsilon({2}, {std::nan("")}, 1e-5, c).error(),
            "rdp values must be >= 0 (+inf allowed), got nan at order 2");
  for (double delta : {0.0, 1.0, -1.0, std::nan("")}) {
    EXPECT_NE(RdpToEpsilon({2}, {1}, delta, c).error().find("delta must be in (0, 1)"),
              std::string::npos);
  }
  for (double epsilon : {-1.0, kInf, std::nan("")}) {
    EXPECT_NE(RdpToDelta({2}, {1}, epsilon, c).error().find("epsilon must be finite and >= 0"),
              std::string::npos);
  }
  // All orders infinite: ε is +inf (truly infinite), δ is 1.
  EXPECT_EQ(RdpToEpsilon({2, 3}, {kInf, kInf}, 1e-5, c)->epsilon, kInf);
  EXPECT_EQ(RdpToDelta({2, 3}, {kInf, kInf}, 1.0, c)->delta, 1.0);
}

TEST(RdpTest, SubsampledGaussianRejectsBadInputs) {
  EXPECT_EQ(RdpPoissonSubsampledGaussian(0, 1, 2).error(), "sampling_rate must be in (0, 1], got 0");
  EXPECT_EQ(RdpPoissonSubsampledGaussian(1.5, 1, 2).error(),
            "sampling_rate must be in (0, 1], got 1.5");
  EXPECT_EQ(RdpPoissonSubsampledGaussian(0.1, -1, 2).error(),
            "noise_multiplier must be finite and > 0, got -1");
  EXPECT_EQ(RdpPoissonSubsampledGaussian(0.1, 1, 1).error(), "order must be finite and > 1, got 1");
  EXPECT_EQ(RdpPoissonSubsampledGaussian(0.1, 1, std::nan("")).error(),
            "order must be finite and > 1, got nan");
  EXPECT_NE(RdpPoissonSubsampledGaussian(0.1, 1, 2e6).error().find("order must be <= 1000000"),
            std::string::npos);
  EXPECT_EQ(RdpPoissonSubsampledGaussianWithTermLimit(0.1, 1, 1.5, 0).error(),
            "max_terms must be >= 1, got 0");
  EXPECT_NE(ComputeRdp(DpSgdEvent(0.1, 1, 1).value(), {2, 0.5}).error().find("order must be"),
            std::string::npos);
}

// Laplace: independent reference by numerical integration of the Rényi divergence
// ∫ p^α r^{1−α} between Lap(0, b) and Lap(1, b), split at the kinks 0 and 1.
TEST(RdpTest, LaplaceMatchesNumericalIntegration) {
  for (double b : {0.1, 0.5, 1.0, 3.0, 100.0}) {
    for (double alpha : {1.01, 1.5, 2.0, 7.0, 30.0}) {
      auto integrand = [&](double x) {
        return std::exp(-(alpha * std::fabs(x) + (1 - alpha) * std::fabs(x - 1)) / b) / (2 * b);
      };
      double total = 0;
      using GK = boost::math::quadrature::gauss_kronrod<double, 61>;
      total += GK::integrate(integrand, -kInf, 0.0, 20, 1e-14);
      total += GK::integrate(integrand, 0.0, 1.0, 20, 1e-14);
      total += GK::integrate(integrand, 1.0, kInf, 20, 1e-14);
      const double expected = std::log(total) / (alpha - 1);
      // 1e-9 relative: quadrature tolerance 1e-14 on a total that is ~1, divided by a
      // divergence that can be as small as ~1e-5 (b = 100).
      EXPECT_NEAR(RdpLaplace(b, alpha).value(), expected, 1e-9 * expected + 1e-15)
          << "b=" << b << " alpha=" << alpha;
    }
  }
  EXPECT_EQ(RdpLaplace(0, 2).error(), "scale must be finite and > 0, got 0");
}

// Pure DP: the randomized-response divergence evaluated directly in 50 digits, and the
// textbook bounds ε(α) <= ε and ε(α) <= αε²/2 (Bun & Steinke 2016, Prop. 3.3).
TEST(RdpTest, PureDpIsRandomizedResponseAndBelowTextbookBounds) {
  for (double eps : {1e-8, 1e-3, 0.1, 1.0, 5.0, 30.0}) {
    for (double alpha : {1.01, 1.5, 2.0, 10.0, 1000.0}) {
      const Big e = eps;
      const Big p = exp(e) / (1 + exp(e));
      const Big a = alpha;
      const double expected =
          static_cast<double>(log(pow(p, a) * pow(1 - p, 1 - a) + pow(1 - p, a) * pow(p, 1 - a)) /
                              (a - 1));
      const double actual = RdpPureDp(eps, alpha).value();
      EXPECT_NEAR(actual, expected, 1e-12 * expected) << "eps=" << eps << " alpha=" << alpha;
      EXPECT_LE(actual, eps);
      EXPECT_LE(actual, alpha * eps * eps / 2 * (1 + 1e-12));
    }
  }
  EXPECT_EQ(RdpPureDp(0, 2).value(), 0.0);
  EXPECT_EQ(RdpPureDp(-1, 2).error(), "epsilon must be finite and >= 0, got -1");
}

// Wang, Balle, Kasiviswanathan 2019, Thm. 9 for a Gaussian inner mechanism
// (ε(j) = j/(2σ²), ε(∞) = ∞), evaluated directly in 50 digits.
double WithoutReplacementReference(double gamma, double sigma, int alpha) {
  const Big g = gamma;
  const auto eps = [&](int j) { return Big(j) / (2 * Big(sigma) * Big(sigma)); };
  Big binom = Big(alpha) * (alpha - 1) / 2;
  Big sum = 1 + g * g * binom * std::min(4 * (exp(eps(2)) - 1), exp(eps(2)) * 2);
  for (int j = 3; j <= alpha; ++j) {
    binom = binom * (alpha - j + 1) / j;
    sum += pow(g, j) * binom * exp((j - 1) * eps(j)) * 2;
  }
  return static_cast<double>(log(sum) / (alpha - 1));
}

TEST(RdpTest, SamplingWithoutReplacementMatchesTheoremNine) {
  for (double sigma : {0.8, 1.0, 4.0}) {
    for (int alpha : {2, 3, 8, 32}) {
      const Event e =
          Event::SampledWithoutReplacement(1000, 10, Event::Gaussian(sigma).value()).value();
      const double expected =
          std::min(WithoutReplacementReference(0.01, sigma, alpha), alpha / (2 * sigma * sigma));
      EXPECT_NEAR(ComputeRdp(e, {static_cast<double>(alpha)}).value()[0], expected,
                  1e-12 * expected)
          << "sigma=" << sigma << " alpha=" << alpha;
      // A fractional order interpolates the cumulant (α−1)ε(α) between the neighbouring
      // integers (WBK 2019, Cor. 10), with (α−1)ε(α) = 0 at α = 1.
      const double low_order = alpha - 1;
      const double low = low_order == 1 ? 0.0
                                        : (low_order - 1) * std::min(
                                              WithoutReplacementReference(0.01, sigma, alpha - 1),
                                              low_order / (2 * sigma * sigma));
      const double interpolated = (0.5 * low + 0.5 * (alpha - 1) * expected) / (alpha - 1.5);
      const double fractional = ComputeRdp(e, {alpha - 0.5}).value()[0];
      EXPECT_NEAR(fractional, std::min(interpolated, (alpha - 0.5) / (2 * sigma * sigma)),
                  1e-12 * fractional);
      EXPECT_LE(fractional, expected * (1 + 1e-12));  // and never above the next integer
    }
  }
}

TEST(RdpTest, SamplingEveryRecordWithoutReplacementIsTheInnerMechanism) {
  const Event inner = Event::Laplace(2).value();
  const Event e = Event::SampledWithoutReplacement(50, 50, inner).value();
  const std::vector<double> orders = {1.5, 2, 10};
  EXPECT_EQ(ComputeRdp(e, orders).value(), ComputeRdp(inner, orders).value());
}

// Pure-ε inner mechanisms use ε(∞) = ε in Thm. 9; with a tiny ε the bound is tiny.
TEST(RdpTest, SamplingWithoutReplacementOfPureDpUsesItsMaxDivergence) {
  const Event e = Event::SampledWithoutReplacement(100, 1, Event::PureDp(0.01).value()).value();
  const double rdp = ComputeRdp(e, {2.0}).value()[0];
  // α = 2: (1/1) log(1 + γ² min{4(e^{ε(2)}−1), e^{ε(2)} (e^ε − 1)²}).
  const double eps2 = RdpPureDp(0.01, 2).value();
  const double expected =
      std::log1p(1e-4 * std::min(4 * std::expm1(eps2), std::exp(eps2) * std::pow(std::expm1(0.01), 2)));
  EXPECT_NEAR(rdp, expected, 1e-12 * expected);
}

TEST(RdpTest, CompositionAddsAndSelfCompositionMultiplies) {
  const std::vector<double> orders = {1.5, 2, 8, 100};
  const Event g = Event::Gaussian(2).value();
  const Event lap = Event::Laplace(1).value();
  const Event pure = Event::PureDp(0.3).value();
  const std::vector<double> rg = ComputeRdp(g, orders).value();
  const std::vector<double> rl = ComputeRdp(lap, orders).value();
  const std::vector<double> rp = ComputeRdp(pure, orders).value();
  const std::vector<double> composed =
      ComputeRdp(Event::Composed({g, lap, Event::SelfComposed(pure, 3).value()}).value(), orders)
          .value();
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_DOUBLE_EQ(rg[i], orders[i] / 8);
    EXPECT_DOUBLE_EQ(composed[i], rg[i] + rl[i] + 3 * rp[i]);
  }
  // Runs of equal children (a ledger's steps) add up like distinct ones.
  const std::vector<double> runs =
      ComputeRdp(Event::Composed({g, g, lap, lap, g, pure}).value(), orders).value();
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_DOUBLE_EQ(runs[i], 3 * rg[i] + 2 * rl[i] + rp[i]);
  }
}

TEST(RdpTest, UnsupportedEventsAreErrors) {
  EXPECT_NE(ComputeRdp(Event::ApproxDp(1, 1e-5).value(), {2}).error().find("approx_dp"),
            std::string::npos);
  const Event sampled_approx =
      Event::PoissonSampled(0.1, Event::ApproxDp(1, 1e-5).value()).value();
  EXPECT_NE(ComputeRdp(sampled_approx, {2}).error().find("approx_dp"), std::string::npos);
  // An error deep in a tree reaches the top.
  EXPECT_FALSE(
      ComputeRdp(Event::Composed({Event::Gaussian(1).value(), sampled_approx}).value(), {2})
          .ok());
}

}  // namespace
}  // namespace dpkit::accounting
