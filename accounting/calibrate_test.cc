#include "dpkit/accounting/calibrate.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

// The returned sigma must meet the target when re-accounted, and sigma * (1 - 0.1 %)
// must not (within 0.1 % of the smallest satisfying sigma).
TEST(CalibrateTest, PldNoiseMeetsTargetAndIsNearlySmallest) {
  const double q = 256.0 / 60000, delta = 1e-5;
  const int64_t steps = 2000;
  auto c = CalibrateNoiseMultiplier(2.0, delta, q, steps, Accountant::kPld);
  ASSERT_TRUE(c.ok()) << c.error();
  auto again = DpSgdEpsilon(q, c->noise_multiplier, steps, delta, Accountant::kPld);
  ASSERT_TRUE(again.ok());
  EXPECT_LE(*again, 2.0);
  EXPECT_EQ(*again, c->epsilon);
  auto smaller = DpSgdEpsilon(q, c->noise_multiplier * (1 - 1e-3), steps, delta,
                              Accountant::kPld);
  ASSERT_TRUE(smaller.ok());
  EXPECT_GT(*smaller, 2.0);
}

// Fixed-size steps (sampling without replacement, replace-one): both accountants' answers
// re-accounted by PldEpsilon / RDP meet the target, 0.1 % less noise misses it, and PLD
// needs less noise than RDP at these settings.
TEST(CalibrateTest, WithoutReplacementNoiseMeetsTargetAndIsNearlySmallest) {
  const int64_t n = 60000, m = 256, steps = 1000;
  const double delta = 1e-5, target = 2.0;
  const auto run = [&](double sigma) {
    return *Event::SelfComposed(
        *Event::SampledWithoutReplacement(n, m, *Event::Gaussian(sigma)), steps);
  };
  auto pld = CalibrateWithoutReplacementNoiseMultiplier(target, delta, n, m, steps,
                                                        Accountant::kPld);
  ASSERT_TRUE(pld.ok()) << pld.error();
  for (const double factor : {1.0, 1 - 1e-3}) {
    auto eps = PldEpsilon(run(pld->noise_multiplier * factor), delta);
    ASSERT_TRUE(eps.ok()) << eps.error();
    if (factor == 1) {
      EXPECT_LE(eps->epsilon_upper, target);
      EXPECT_EQ(eps->epsilon_upper, pld->epsilon);
    } else {
      EXPECT_GT(eps->epsilon_upper, target);
    }
  }
  CalibrationOptions optimal;
  optimal.rdp_conversion = CalibrationOptions::RdpConversion::kOptimal;
  auto rdp = CalibrateWithoutReplacementNoiseMultiplier(target, delta, n, m, steps,
                                                        Accountant::kRdp, optimal);
  ASSERT_TRUE(rdp.ok()) << rdp.error();
  EXPECT_LE(rdp->epsilon, target);
  EXPECT_LT(pld->noise_multiplier, rdp->noise_multiplier);
  EXPECT_FALSE(CalibrateWithoutReplacementNoiseMultiplier(target, delta, n, m, steps,
                                                          Accountant::kGdp)
                   .ok());
  EXPECT_FALSE(CalibrateWithoutReplacementNoiseMultiplier(target, delta, 10, 11, steps,
                                                          Accountant::kPld)
                   .ok());
}

TEST(CalibrateTest, RdpNeedsMoreNoiseThanPld) {
  auto pld = CalibrateNoiseMultiplier(1.0, 1e-5, 0.01, 1000, Accountant::kPld);
  auto rdp = CalibrateNoiseMultiplier(1.0, 1e-5, 0.01, 1000, Accountant::kRdp);
  ASSERT_TRUE(pld.ok()) << pld.error();
  ASSERT_TRUE(rdp.ok()) << rdp.error();
  EXPECT_LT(pld->noise_multiplier, rdp->noise_multiplier);
  EXPECT_LE(rdp->epsilon, 1.0);
}

TEST(CalibrateTest, RdpConversionOptionIsUsedForTheSearchAndTheAnswer) {
  // The optimal conversion (Asoodeh et al. 2021) is never above the improved one, so it
  // needs at most the same noise; each answer is re-accounted with its own conversion.
  CalibrationOptions optimal;
  optimal.rdp_conversion = CalibrationOptions::RdpConversion::kOptimal;
  CalibrationOptions classic;
  classic.rdp_conversion = CalibrationOptions::RdpConversion::kClassic;
  const double q = 0.01, delta = 1e-5;
  const int64_t steps = 1000;
  auto improved_c = CalibrateNoiseMultiplier(1.0, delta, q, steps, Accountant::kRdp);
  auto optimal_c = CalibrateNoiseMultiplier(1.0, delta, q, steps, Accountant::kRdp, optimal);
  auto classic_c = CalibrateNoiseMultiplier(1.0, delta, q, steps, Accountant::kRdp, classic);
  ASSERT_TRUE(improved_c.ok() && optimal_c.ok() && classic_c.ok());
  EXPECT_LE(optimal_c->noise_multiplier, improved_c->noise_multiplier);
  EXPECT_LE(improved_c->noise_multiplier, classic_c->noise_multiplier);
  EXPECT_EQ(*DpSgdEpsilon(q, optimal_c->noise_multiplier, steps, delta, Accountant::kRdp,
                          optimal),
            optimal_c->epsilon);
  EXPECT_GT(*DpSgdEpsilon(q, optimal_c->noise_multiplier * (1 - 1e-3), steps, delta,
                          Accountant::kRdp, optimal),
            1.0);
}

TEST(CalibrateTest, LargestStepsIsTheLastStepWithinBudget) {
  for (Accountant a : {Accountant::kRdp, Accountant::kGdp}) {
    SCOPED_TRACE(AccountantName(a));
    auto t = LargestSteps(1.0, 1e-5, 0.01, 1.0, 100000, a);
    ASSERT_TRUE(t.ok()) << t.error();
    ASSERT_GT(t->steps, 0);
    ASSERT_LT(t->steps, 100000);
    EXPECT_EQ(*DpSgdEpsilon(0.01, 1.0, t->steps, 1e-5, a), t->epsilon);
    EXPECT_LE(t->epsilon, 1.0);
    EXPECT_GT(*DpSgdEpsilon(0.01, 1.0, t->steps + 1, 1e-5, a), 1.0);
  }
}

TEST(CalibrateTest, PldLargestStepsIsTheLastStepWithinBudget) {
  // A moderate case (a few hundred steps) keeps the ~20 PLD evaluations quick.
  const double q = 0.02, sigma = 1.0, delta = 1e-5, target = 2.0;
  auto t = LargestSteps(target, delta, q, sigma, 1000000, Accountant::kPld);
  ASSERT_TRUE(t.ok()) << t.error();
  ASSERT_GT(t->steps, 0);
  EXPECT_LE(*DpSgdEpsilon(q, sigma, t->steps, delta, Accountant::kPld), target);
  EXPECT_GT(*DpSgdEpsilon(q, sigma, t->steps + 1, delta, Accountant::kPld), target);
  // The certified PLD bound allows more steps than the RDP bound (it is tighter).
  auto rdp = LargestSteps(target, delta, q, sigma, 1000000, Accountant::kRdp);
  ASSERT_TRUE(rdp.ok()) << rdp.error();
  EXPECT_GT(t->steps, rdp->steps);
}

TEST(CalibrateTest, LargestStepsEdgeCases) {
  // One step of q = 1, sigma = 0.5 is far above epsilon = 0.1: no step fits.
  auto none = LargestSteps(0.1, 1e-5, 1.0, 0.5, 1000, Accountant::kRdp);
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_EQ(none->steps, 0);
  EXPECT_TRUE(std::isinf(none->epsilon));
  // A budget that max_steps cannot exhaust returns max_steps.
  auto capped = LargestSteps(10.0, 1e-5, 0.001, 5.0, 777, Accountant::kRdp);
  ASSERT_TRUE(capped.ok()) << capped.error();
  EXPECT_EQ(capped->steps, 777);
  EXPECT_LE(capped->epsilon, 10.0);
  EXPECT_FALSE(LargestSteps(1.0, 1e-5, 0.01, 0.0, 10, Accountant::kRdp).ok());
  EXPECT_FALSE(LargestSteps(1.0, 1e-5, 0.01, 1.0, 0, Accountant::kRdp).ok());
  // Huge noise: max_steps itself meets the target (issue 21: sigma 1e308 searched for
  // over a minute).
  for (const Accountant a : {Accountant::kRdp, Accountant::kGdp}) {
    auto huge = LargestSteps(1.0, 1e-5, 0.01, 1e308, 1000000000, a);
    ASSERT_TRUE(huge.ok()) << huge.error();
    EXPECT_EQ(huge->steps, 1000000000);
    EXPECT_LE(huge->epsilon, 1.0);
  }
}

// Independent computation of eq. (3.2) of Bu et al. 2020 with std::erfc and of its
// inverse in mu by plain bisection (not the library's TOMS 748 in long double).
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double ClosedFormGdpDelta(double mu, double eps) {
  return Phi(-eps / mu + mu / 2) - std::exp(eps) * Phi(-eps / mu - mu / 2);
}
double BisectGdpMu(double eps, double delta) {
  double lo = 1e-6, hi = 50;  // delta(eps; mu) increases in mu
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (ClosedFormGdpDelta(mid, eps) > delta ? hi : lo) = mid;
  }
  return lo;
}

TEST(CalibrateTest, GdpLargestStepsMatchesTheClosedForm) {
  // mu_CLT = q sqrt(T (e^{1/sigma^2} - 1)) <= mu* (Bu et al. 2020, eq. 3.1) gives
  // T_max = floor(mu*^2 / (q^2 (e^{1/sigma^2} - 1))).
  const double q = 0.01, sigma = 1.0, delta = 1e-5, target = 1.5;
  const double mu_star = BisectGdpMu(target, delta);
  const double t_max = std::floor(mu_star * mu_star / (q * q * std::expm1(1 / (sigma * sigma))));
  auto t = LargestSteps(target, delta, q, sigma, 100000000, Accountant::kGdp);
  ASSERT_TRUE(t.ok()) << t.error();
  // Exact unless mu*^2 / (...) lies within rounding of an integer.
  EXPECT_EQ(static_cast<double>(t->steps), t_max);
}

TEST(CalibrateTest, GdpNoiseMatchesTheClosedForm) {
  // Eq. (3.1) solved for sigma (Bu et al. 2020, eq. 3.4):
  // sigma* = 1 / sqrt(log(1 + mu*^2 / (q^2 T))); the search returns a sigma within
  // 0.1 % above it.
  const double q = 256.0 / 60000, delta = 1e-5, target = 2.0;
  const int64_t steps = 14063;
  const double mu = BisectGdpMu(target, delta);
  const double sigma_star = 1 / std::sqrt(std::log1p(mu * mu / (q * q * steps)));
  auto c = CalibrateNoiseMultiplier(target, delta, q, steps, Accountant::kGdp);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_GE(c->noise_multiplier, sigma_star * (1 - 1e-12));
  EXPECT_LE(c->noise_multiplier, sigma_star * (1 + 1e-3));
}

TEST(CalibrateTest, UnreachableTargetsAreErrors) {
  // q = 1, a million steps and epsilon 1e-3 need sigma ~ 1e6 > 1e4.
  auto noise = CalibrateNoiseMultiplier(1e-3, 1e-5, 1.0, 1000000, Accountant::kRdp);
  ASSERT_FALSE(noise.ok());
  EXPECT_NE(noise.error().find("no noise_multiplier <= 1e4"), std::string::npos);
  // 1000 epochs at sigma = 0.5 stay above epsilon = 1e-20 for every q whose
  // ceil(epochs / q) <= 1e12 steps (mu_CLT = sqrt(q * epochs * (e^4 - 1)) >= 7e-3).
  auto rate = LargestSamplingRateForEpochs(1e-20, 1e-5, 0.5, 1000, Accountant::kGdp);
  ASSERT_FALSE(rate.ok());
  EXPECT_NE(rate.error().find("no sampling_rate >= 1e-12"), std::string::npos);
}

TEST(CalibrateTest, LargestSamplingRateMeetsTargetAndIsNearlyLargest) {
  const double delta = 1e-5, sigma = 1.0, target = 1.0;
  const int64_t steps = 1000;
  for (Accountant a : {Accountant::kRdp, Accountant::kGdp, Accountant::kPld}) {
    SCOPED_TRACE(AccountantName(a));
    auto c = LargestSamplingRate(target, delta, sigma, steps, a);
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c->steps, steps);
    ASSERT_LT(c->sampling_rate, 1.0);
    auto again = DpSgdEpsilon(c->sampling_rate, sigma, steps, delta, a);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, c->epsilon);
    EXPECT_LE(*again, target);
    auto larger = DpSgdEpsilon(c->sampling_rate * (1 + 1e-3), sigma, steps, delta, a);
    ASSERT_TRUE(larger.ok());
    EXPECT_GT(*larger, target);
  }
}

TEST(CalibrateTest, GdpLargestSamplingRateMatchesTheClosedForm) {
  // Eq. (3.1) solved for q: q_max = mu* / sqrt(T (e^{1/sigma^2} - 1)); the search
  // returns a q within 0.1 % below it.
  const double delta = 1e-5, sigma = 0.8, target = 3.0;
  const int64_t steps = 5000;
  const double q_max = BisectGdpMu(target, delta) /
                       std::sqrt(steps * std::expm1(1 / (sigma * sigma)));
  auto c = LargestSamplingRate(target, delta, sigma, steps, Accountant::kGdp);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_LE(c->sampling_rate, q_max * (1 + 1e-12));
  EXPECT_GE(c->sampling_rate, q_max * (1 - 1e-3));
}

TEST(CalibrateTest, LargestSamplingRateForEpochsRecomputesTheSteps) {
  const double epochs = 10, sigma = 1.0, delta = 1e-5, target = 2.0;
  auto c = LargestSamplingRateForEpochs(target, delta, sigma, epochs, Accountant::kRdp);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->steps, static_cast<int64_t>(std::ceil(epochs / c->sampling_rate)));
  EXPECT_LE(*DpSgdEpsilon(c->sampling_rate, sigma, c->steps, delta, Accountant::kRdp),
            target);
  const double q_up = c->sampling_rate * (1 + 1e-3);
  const auto t_up = static_cast<int64_t>(std::ceil(epochs / q_up));
  EXPECT_GT(*DpSgdEpsilon(q_up, sigma, t_up, delta, Accountant::kRdp), target);
}

TEST(CalibrateTest, LargestSamplingRateEdgeCases) {
  // A loose budget is met at q = 1.
  auto full = LargestSamplingRate(100.0, 1e-5, 5.0, 10, Accountant::kRdp);
  ASSERT_TRUE(full.ok()) << full.error();
  EXPECT_EQ(full->sampling_rate, 1.0);
  EXPECT_FALSE(LargestSamplingRate(1.0, 1e-5, 1.0, 0, Accountant::kRdp).ok());
  EXPECT_FALSE(LargestSamplingRate(1.0, 1e-5, -1.0, 10, Accountant::kRdp).ok());
  EXPECT_FALSE(LargestSamplingRateForEpochs(1.0, 1e-5, 1.0, 0.0, Accountant::kRdp).ok());
}

// sigma~ of Bu et al. 2020, eqs. (3.3)-(3.4). First our reading of the definition
// against the paper's published values (Fig. 4, MNIST, p = 256/60000, delta = 1e-5):
// the moments accountant's (1.34, 1e-5) at 20 epochs of sigma = 1.3 gives sigma~ = 1.06,
// and (8.68, 1e-5) at 70 epochs of sigma = 0.7 gives sigma~ = 0.638. Then the PLD
// version against the same chain computed independently (bisection on eq. 3.2 with
// std::erfc, eq. 3.4 in closed form) from the certified epsilon bounds.
TEST(CalibrateTest, CltEquivalentNoiseFollowsEqs33And34) {
  const double q = 256.0 / 60000, delta = 1e-5;
  auto tilde = [&](double eps, double steps) {
    const double mu = BisectGdpMu(eps, delta);
    return 1 / std::sqrt(std::log1p(mu * mu / (q * q * steps)));
  };
  const int64_t t20 = 4688, t70 = 16407;  // ceil(epochs * 60000 / 256)
  EXPECT_NEAR(tilde(1.34, t20), 1.06, 0.005);   // printed to 2 decimals
  EXPECT_NEAR(tilde(8.68, t70), 0.638, 0.0005);  // printed to 3 decimals

  auto c = CltEquivalentNoiseMultiplier(q, 1.3, t20, delta);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_LE(c->epsilon_lower, c->epsilon_upper);
  // 1e-6 relative: both sides solve eq. (3.2) to ~1e-12 in mu.
  EXPECT_NEAR(c->noise_multiplier, tilde(c->epsilon_upper, t20), 1e-6);
  EXPECT_NEAR(c->noise_multiplier_upper, tilde(c->epsilon_lower, t20), 1e-6);
  EXPECT_NEAR(c->mu, BisectGdpMu(c->epsilon_upper, delta), 1e-8);
  EXPECT_LE(c->noise_multiplier, c->noise_multiplier_upper);
  // The certified epsilon is below the moments accountant's 1.34, so the CLT needs
  // less noise to match MA than to match PLD: 1.06 < sigma~_PLD; and the CLT
  // under-reports epsilon here, so sigma~_PLD < sigma = 1.3.
  EXPECT_LT(c->epsilon_upper, 1.34);
  EXPECT_GT(c->noise_multiplier, 1.06);
  EXPECT_LT(c->noise_multiplier_upper, 1.3);
  EXPECT_FALSE(CltEquivalentNoiseMultiplier(q, 1.3, t20, 0.0).ok());
  EXPECT_FALSE(CltEquivalentNoiseMultiplier(0.0, 1.3, t20, delta).ok());
}

TEST(CalibrateTest, RejectsBadInput) {
  EXPECT_FALSE(CalibrateNoiseMultiplier(0, 1e-5, 0.01, 10, Accountant::kPld).ok());
  EXPECT_FALSE(CalibrateNoiseMultiplier(1, 0, 0.01, 10, Accountant::kPld).ok());
  EXPECT_FALSE(CalibrateNoiseMultiplier(1, 1e-5, 1.5, 10, Accountant::kPld).ok());
  EXPECT_FALSE(CalibrateNoiseMultiplier(1, 1e-5, 0.01, 0, Accountant::kPld).ok());
}

}  // namespace
}  // namespace dpkit::accounting
