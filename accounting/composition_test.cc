#include "dpkit/accounting/composition.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

// Hockey-stick divergence E_{e^eps'}(P^k || Q^k) of the k-fold product of KOV's
// canonical (eps, delta) pair, by brute-force enumeration of all 4^k outcomes in
// long double. The pair (Kairouz, Oh, Viswanath 2015, Sec. 3) on 4 outcomes:
//   P = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0)
//   Q = (0, (1-delta)/(1+e^eps), (1-delta) e^eps/(1+e^eps), delta).
// Independent of the binomial formula used by OptimalCompositionDelta.
long double BruteForceCompositionDelta(double epsilon, double delta, int count,
                                       double total_epsilon) {
  const long double e = std::exp(static_cast<long double>(epsilon));
  const long double p[4] = {delta, (1 - delta) * e / (1 + e), (1 - delta) / (1 + e), 0};
  const long double q[4] = {0, (1 - delta) / (1 + e), (1 - delta) * e / (1 + e), delta};
  const long double threshold = std::exp(static_cast<long double>(total_epsilon));
  int64_t outcomes = 1;
  for (int i = 0; i < count; ++i) outcomes *= 4;
  long double sum = 0;
  for (int64_t o = 0; o < outcomes; ++o) {
    long double pp = 1, qq = 1;
    int64_t code = o;
    for (int i = 0; i < count; ++i) {
      pp *= p[code % 4];
      qq *= q[code % 4];
      code /= 4;
    }
    sum += std::max(0.0L, pp - threshold * qq);
  }
  return sum;
}

TEST(BasicCompositionTest, AddsEpsilonsAndDeltas) {
  Result<ApproxDpGuarantee> g = BasicComposition(0.5, 1e-6, 10);
  ASSERT_TRUE(g.ok());
  EXPECT_DOUBLE_EQ(g->epsilon, 5.0);
  EXPECT_DOUBLE_EQ(g->delta, 1e-5);
  g = BasicComposition({{0.1, 1e-7}, {0.4, 0.0}, {1.0, 1e-6}});
  ASSERT_TRUE(g.ok());
  EXPECT_DOUBLE_EQ(g->epsilon, 1.5);
  EXPECT_DOUBLE_EQ(g->delta, 1.1e-6);
  EXPECT_DOUBLE_EQ(BasicComposition(1.0, 0.5, 3)->delta, 1.0);  // capped
}

TEST(AdvancedCompositionTest, MatchesTheFormulaByHand) {
  // eps = 0.1, k = 100, delta' = e^-2: 0.1 sqrt(2*100*2) + 100*0.1*(e^0.1 - 1).
  Result<ApproxDpGuarantee> g = AdvancedComposition(0.1, 1e-7, 100, std::exp(-2.0));
  ASSERT_TRUE(g.ok());
  EXPECT_NEAR(g->epsilon, 2.0 + 10 * (std::exp(0.1) - 1), 1e-12);
  EXPECT_NEAR(g->delta, 1e-5 + std::exp(-2.0), 1e-15);
}

TEST(OptimalCompositionTest, OneMechanismGivesItsOwnGuarantee) {
  for (double epsilon : {0.1, 1.0, 3.0}) {
    for (double delta : {0.0, 1e-6, 0.01}) {
      Result<double> total = OptimalCompositionDelta(epsilon, delta, 1, epsilon);
      ASSERT_TRUE(total.ok());
      EXPECT_NEAR(*total, delta, 1e-15);
      if (delta > 0) {
        Result<double> eps = OptimalCompositionEpsilon(epsilon, delta, 1, delta);
        ASSERT_TRUE(eps.ok()) << eps.error();
        EXPECT_NEAR(*eps, epsilon, 1e-9);
      }
    }
  }
}

TEST(OptimalCompositionTest, TwoPureMechanismsAtZeroEpsilonGiveTanh) {
  // k = 2, delta = 0, eps' = 0: (e^{2eps} - 1) / (1 + e^eps)^2 = tanh(eps / 2).
  for (double epsilon : {0.1, 1.0, 2.5}) {
    EXPECT_NEAR(*OptimalCompositionDelta(epsilon, 0.0, 2, 0.0), std::tanh(epsilon / 2),
                1e-15);
    // eps' = eps: only l = 0 counts: (e^{2eps} - e^eps) / (1 + e^eps)^2.
    const double e = std::exp(epsilon);
    EXPECT_NEAR(*OptimalCompositionDelta(epsilon, 0.0, 2, epsilon),
                (e * e - e) / ((1 + e) * (1 + e)), 1e-15);
  }
}

TEST(OptimalCompositionTest, MatchesBruteForceEnumerationOfTheCanonicalPair) {
  for (int count : {1, 2, 3, 5, 7}) {
    for (double epsilon : {0.2, 1.0}) {
      for (double delta : {0.0, 1e-3}) {
        for (double fraction : {0.0, 0.15, 0.4, 0.6, 0.99}) {
          const double total_epsilon = fraction * count * epsilon;
          const double expected = static_cast<double>(
              BruteForceCompositionDelta(epsilon, delta, count, total_epsilon));
          Result<double> delta_total =
              OptimalCompositionDelta(epsilon, delta, count, total_epsilon);
          ASSERT_TRUE(delta_total.ok());
          // Both sides in long double; 1e-12 relative covers summation order.
          EXPECT_NEAR(*delta_total, expected, 1e-12 * expected + 1e-300)
              << "k = " << count << " eps = " << epsilon << " delta = " << delta
              << " eps' = " << total_epsilon;
        }
      }
    }
  }
}

TEST(OptimalCompositionTest, IsNoWorseThanAdvancedWhichIsNoWorseThanBasic) {
  // Small per-mechanism epsilon and many mechanisms: the regime where advanced
  // composition beats basic composition.
  for (int64_t count : {50, 200, 1000}) {
    for (double epsilon : {0.01, 0.05}) {
      const double delta = 1e-8, slack = 1e-6;
      ApproxDpGuarantee basic = *BasicComposition(epsilon, delta, count);
      ApproxDpGuarantee advanced = *AdvancedComposition(epsilon, delta, count, slack);
      Result<double> optimal =
          OptimalCompositionEpsilon(epsilon, delta, count, advanced.delta);
      ASSERT_TRUE(optimal.ok()) << optimal.error();
      EXPECT_LT(advanced.epsilon, basic.epsilon) << "k = " << count;
      EXPECT_LT(*optimal, advanced.epsilon) << "k = " << count;
      // The epsilon found meets the delta budget (safe side).
      EXPECT_LE(*OptimalCompositionDelta(epsilon, delta, count, *optimal),
                advanced.delta * (1 + 1e-12));
    }
  }
}

TEST(OptimalCompositionTest, DeltaDecreasesInTotalEpsilonAndStaysFiniteForLargeCounts) {
  double previous = 2;
  for (double total = 0; total <= 50; total += 2.5) {
    Result<double> d = OptimalCompositionDelta(0.5, 1e-9, 100000, total);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(std::isfinite(*d));
    EXPECT_LE(*d, previous);
    previous = *d;
  }
}

TEST(OptimalCompositionTest, RejectsUnreachableDeltaAndBadArguments) {
  // 1 - (1 - 0.01)^10 ~ 0.0956 > 0.05: no epsilon can reach it.
  Result<double> eps = OptimalCompositionEpsilon(1.0, 0.01, 10, 0.05);
  EXPECT_FALSE(eps.ok());
  EXPECT_NE(eps.error().find("total_delta"), std::string::npos);
  EXPECT_FALSE(OptimalCompositionDelta(-1.0, 0.0, 2, 1.0).ok());
  EXPECT_FALSE(OptimalCompositionDelta(1.0, 1.5, 2, 1.0).ok());
  EXPECT_FALSE(OptimalCompositionDelta(1.0, 0.0, 0, 1.0).ok());
  EXPECT_FALSE(OptimalCompositionDelta(1.0, 0.0, 2, NAN).ok());
  EXPECT_FALSE(AdvancedComposition(1.0, 0.0, 2, 0.0).ok());
  EXPECT_FALSE(BasicComposition(NAN, 0.0, 2).ok());
  EXPECT_FALSE(BasicComposition(std::vector<ApproxDpGuarantee>{}).ok());
}

}  // namespace
}  // namespace dpkit::accounting
