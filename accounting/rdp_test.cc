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

namespace dpkit::accounting {
namespace {

using Big = boost::multiprecision::cpp_bin_float_50;
constexpr double kInf = std::numeric_limits<double>::infinity();

double Rdp(double q, double sigma, double order) {
  Result<double> r = RdpPoissonSubsampledGaussian(q, sigma, order);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r : std::nan("");
}

double EpsilonFor(const Event& event, double delta, RdpConversion conversion,
                  const std::vector<double>& orders = DefaultRdpOrders()) {
  Result<std::vector<double>> rdp = ComputeRdp(event, orders);
  EXPECT_TRUE(rdp.ok()) << rdp.error();
  Result<RdpEpsilon> eps = RdpToEpsilon(orders, *rdp, delta, conversion);
  EXPECT_TRUE(eps.ok()) << eps.error();
  return eps->epsilon;
}

// Independent reference: the binomial sum of Mironov, Talwar, Zhang 2019 (Sec. 3.2)
// written out directly, with no log-space or cancellation tricks, in 50-digit arithmetic.
double IntegerOrderReference(double q, double sigma, int alpha) {
  const Big bq = q;
  const Big two_sigma2 = Big(2) * Big(sigma) * Big(sigma);
  Big sum = 0;
  Big binom = 1;
  for (int k = 0; k <= alpha; ++k) {
    if (k > 0) binom = binom * (alpha - k + 1) / k;
    sum += binom * pow(1 - bq, alpha - k) * pow(bq, k) * exp(Big(k * (k - 1)) / two_sigma2);
  }
  return static_cast<double>(log(sum) / (alpha - 1));
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
