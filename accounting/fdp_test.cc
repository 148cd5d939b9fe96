#include "dpkit/accounting/fdp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"
#include "boost/math/distributions/normal.hpp"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

// Independent closed forms (written out here, not taken from gdp.cc).
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
// Φ^{-1}(1 − α), accurate for tiny α.
double UpperQuantile(double alpha) {
  return boost::math::quantile(
      boost::math::complement(boost::math::normal_distribution<double>(), alpha));
}
double G(double mu, double alpha) {
  if (alpha <= 0) return 1;
  if (alpha >= 1) return 0;
  return Phi(UpperQuantile(alpha) - mu);
}
// δ(ε) of μ-GDP, Dong, Roth, Su 2019, Cor. 2.13.
double GdpDeltaClosedForm(double mu, double eps) {
  return Phi(-eps / mu + mu / 2) - std::exp(eps) * Phi(-eps / mu - mu / 2);
}

void ExpectValidConvexCurve(const TradeoffCurve& c) {
  Result<void> ok = CheckTradeoffCurve(c, /*require_convex=*/true);
  EXPECT_TRUE(ok.ok()) << ok.error();
}

// Largest G_mu(α) − curve(α) and the largest curve(α) − G_mu(α) on a fine grid.
std::pair<double, double> GapsToGaussian(const TradeoffCurve& c, double mu) {
  double below = 0, above = -1;
  for (int i = 0; i <= 20000; ++i) {
    const double a = i / 20000.0;
    const double d = G(mu, a) - EvaluateTradeoff(c, a);
    below = std::max(below, d);
    above = std::max(above, -d);
  }
  return {below, above};
}

// Tangent spacing in z is (μ + 18)/(points − 1) ≈ 0.01 for 2000 points; the gap of a
// tangent envelope is ~ G'' Δα² / 8, below 1e-4 here. The envelope must never be above G
// (1e-15: rounding of Φ).
TEST(FdpTest, GaussianCurveIsALowerEnvelopeOfGMu) {
  for (double mu : {0.0, 0.5, 1.0, 3.0}) {
    auto c = GaussianTradeoffCurve(mu, 2000);
    ASSERT_TRUE(c.ok()) << c.error();
    ExpectValidConvexCurve(*c);
    auto [below, above] = GapsToGaussian(*c, mu);
    EXPECT_LE(above, 1e-15) << mu;
    EXPECT_LE(below, 1e-4) << mu;
  }
}

// DRS 2019, Prop. 2.12: δ(ε) = 1 + G_μ*(−e^ε) must equal the closed form of GDP.
// The envelope is below G_μ, so its δ is above the closed form, by at most the
// curve gap (1e-4).
TEST(FdpTest, GaussianConjugateMatchesClosedFormGdpDelta) {
  for (double mu : {0.5, 1.0, 3.0}) {
    auto c = GaussianTradeoffCurve(mu, 2000);
    ASSERT_TRUE(c.ok());
    for (double eps : {0.0, 0.25, 1.0, 2.0, 5.0}) {
      const double exact = GdpDeltaClosedForm(mu, eps);
      const double from_curve = DeltaFromTradeoff(*c, eps);
      EXPECT_GE(from_curve, exact - 1e-15) << mu << " " << eps;
      EXPECT_LE(from_curve, exact + 1e-4) << mu << " " << eps;
    }
  }
}

TEST(FdpTest, ApproxDpCurveAndItsDeltasAgree) {
  for (double eps : {0.0, 0.5, 2.0}) {
    for (double delta : {0.0, 1e-5, 0.1}) {
      auto c = ApproxDpTradeoffCurve(eps, delta);
      ASSERT_TRUE(c.ok());
      ExpectValidConvexCurve(*c);
      for (double a : {0.0, 0.01, 0.2, 0.5, 0.9, 1.0}) {
        EXPECT_NEAR(EvaluateTradeoff(*c, a), ApproxDpTradeoff(eps, delta, a), 1e-15);
      }
      // δ(ε') of f_{ε,δ}: δ for ε' >= ε, δ + (1 − δ)(e^ε − e^ε')/(1 + e^ε) below (the
      // hockey-stick of the randomized-response pair of Kairouz, Oh, Viswanath 2015).
      for (double e2 : {0.0, 0.3, 1.0, 3.0}) {
        const double expected =
            e2 >= eps ? delta
                      : delta + (1 - delta) * (std::exp(eps) - std::exp(e2)) / (1 + std::exp(eps));
        EXPECT_NEAR(DeltaFromTradeoff(*c, e2), expected, 1e-15) << eps << " " << e2;
      }
      // And back: sup of f_{ε,δ} over one (ε, δ) is f_{ε,δ} itself.
      auto back = TradeoffFromDeltas({eps}, {delta});
      ASSERT_TRUE(back.ok());
      for (double a : {0.0, 0.05, 0.3, 0.7, 1.0}) {
        EXPECT_NEAR(EvaluateTradeoff(*back, a), EvaluateTradeoff(*c, a), 1e-15);
      }
      // f_{ε,δ} is symmetric.
      TradeoffCurve inv = InverseTradeoff(*c);
      for (double a : {0.0, 0.05, 0.3, 0.7, 1.0}) {
        EXPECT_NEAR(EvaluateTradeoff(inv, a), EvaluateTradeoff(*c, a), 1e-15);
      }
    }
  }
}

// DRS 2019, Prop. 2.12 in the other direction: the curve rebuilt from the GDP δ(ε) on a
// grid of ε is below G_μ and, with ε every 0.01 up to 8, close to it.
TEST(FdpTest, CurveFromGdpDeltasIsBelowAndCloseToGMu) {
  const double mu = 1.0;
  std::vector<double> eps, delta;
  for (int i = 0; i <= 800; ++i) {
    eps.push_back(i * 0.01);
    delta.push_back(GdpDeltaClosedForm(mu, i * 0.01));
  }
  auto c = TradeoffFromDeltas(eps, delta);
  ASSERT_TRUE(c.ok());
  ExpectValidConvexCurve(*c);
  auto [below, above] = GapsToGaussian(*c, mu);
  EXPECT_LE(above, 1e-15);
  EXPECT_LE(below, 1e-3);
}

// A single Gaussian mechanism with noise multiplier σ is exactly G_{1/σ}
// (DRS 2019, Sec. 2.2). The PLD curve must be below it everywhere (certified) and,
// at the default tolerance 1e-4 of ε, within 1e-3 of it.
TEST(FdpTest, PldCurveOfAGaussianIsBelowAndCloseToGOneOverSigma) {
  for (double sigma : {0.8, 2.0}) {
    auto event = Event::Gaussian(sigma);
    ASSERT_TRUE(event.ok());
    auto c = PldTradeoffCurve(*event);
    ASSERT_TRUE(c.ok()) << c.error();
    ExpectValidConvexCurve(*c);
    auto [below, above] = GapsToGaussian(*c, 1 / sigma);
    EXPECT_LE(above, 1e-12) << sigma;
    EXPECT_LE(below, 1e-3) << sigma;
    std::printf("sigma %g: PLD curve gap to G_1/sigma %.3g\n", sigma, below);
  }
}

// For DP-SGD the δ(ε) read off the PLD curve must lie within the certified PLD
// interval's upper side: at least the certified lower bound (the curve is below the
// truth, so its δ is above the true δ), and close to the certified upper bound.
TEST(FdpTest, PldCurveOfDpSgdGivesCertifiedDeltas) {
  auto event = DpSgdEvent(0.01, 1.0, 300);
  ASSERT_TRUE(event.ok());
  auto c = PldTradeoffCurve(*event);
  ASSERT_TRUE(c.ok()) << c.error();
  ExpectValidConvexCurve(*c);
  for (double eps : {0.0, 0.5, 1.0, 1.5, 2.0}) {
    auto bounds = PldDelta(*event, eps);
    ASSERT_TRUE(bounds.ok());
    const double from_curve = DeltaFromTradeoff(*c, eps);
    EXPECT_GE(from_curve, bounds->delta_lower) << eps;
    // Within 1 % plus an absolute 1e-8: PessimisticComposedPlds (untilted composition)
    // moves the mass beyond its window to +inf with a loose bound (here 3.9e-9 of
    // infinity mass), which PldDelta's tilted composition does not need.
    EXPECT_LE(from_curve, bounds->delta_upper * 1.01 + 1e-8) << eps;
    std::printf("eps %g: curve delta %.6g, pld [%.6g, %.6g]\n", eps, from_curve,
                bounds->delta_lower, bounds->delta_upper);
  }
  // The RDP-implied curve is also certified, so its min error is below the PLD one's
  // upper side... and both below 1 − TV of the CLT would be meaningless; compare the
  // certified lower bounds of min(α + β) with the PLD interval instead.
  auto tv = PldDelta(*event, 0.0);
  ASSERT_TRUE(tv.ok());
  EXPECT_LE(MinimumErrorSum(*c), 1 - tv->delta_lower + 1e-12);
  auto rdp = RdpTradeoffCurveForEvent(*event);
  ASSERT_TRUE(rdp.ok());
  ExpectValidConvexCurve(*rdp);
  EXPECT_LE(MinimumErrorSum(*rdp), 1 - tv->delta_lower + 1e-12);
}

// The RDP curve is below its pointwise definition (conversions.h) and below the exact
// Gaussian curve.
TEST(FdpTest, RdpCurveIsBelowItsDefinitionAndTheTruth) {
  const std::vector<double> orders = DefaultRdpOrders();
  const double sigma = 1.5;
  std::vector<double> rdp;
  for (double a : orders) rdp.push_back(a / (2 * sigma * sigma));
  auto c = RdpTradeoffCurve(orders, rdp, 400);
  ASSERT_TRUE(c.ok()) << c.error();
  ExpectValidConvexCurve(*c);
  for (int i = 0; i <= 997; ++i) {
    const double x = i / 997.0;
    auto t = RdpTradeoffLowerBound(orders, rdp, x);
    ASSERT_TRUE(t.ok());
    EXPECT_LE(EvaluateTradeoff(*c, x), *t + 1e-12) << x;
    EXPECT_GE(EvaluateTradeoff(*c, x), *t - 1e-3) << x;  // the grid resolves T
    EXPECT_LE(EvaluateTradeoff(*c, x), G(1 / sigma, x) + 1e-12) << x;
  }
}

// Two code paths for the same quantity: the optimal RDP δ(ε) of conversions.h (a
// golden-section supremum over binary pairs) and 1 + T*(−e^ε) of the RDP curve (a
// piecewise-linear envelope below T). The curve's δ must be at least the optimum
// (its curve is lower) and, with 1600 points, within 2 % + 1e-9 of it.
TEST(FdpTest, RdpCurveConjugateAgreesWithTheOptimalConversion) {
  const std::vector<double> orders = DefaultRdpOrders();
  auto event = DpSgdEvent(0.01, 1.0, 100);
  ASSERT_TRUE(event.ok());
  auto rdp = ComputeRdp(*event, orders);
  ASSERT_TRUE(rdp.ok());
  auto c = RdpTradeoffCurve(orders, *rdp, 1600);
  ASSERT_TRUE(c.ok());
  for (double eps : {0.0, 0.3, 0.7, 1.0, 1.5}) {
    auto optimal = RdpToDeltaOptimal(orders, *rdp, eps);
    ASSERT_TRUE(optimal.ok());
    const double from_curve = DeltaFromTradeoff(*c, eps);
    EXPECT_GE(from_curve, optimal->delta * (1 - 1e-9)) << eps;
    EXPECT_LE(from_curve, optimal->delta * 1.02 + 1e-9) << eps;
    // Jointly over all orders is never worse than the best single order.
    double best_single = 1;
    for (size_t i = 0; i < orders.size(); ++i) {
      auto d = RdpOrderToDeltaOptimal(orders[i], (*rdp)[i], eps);
      ASSERT_TRUE(d.ok());
      best_single = std::min(best_single, *d);
    }
    EXPECT_LE(optimal->delta, best_single * (1 + 1e-12)) << eps;
  }
}

// Brute-force reference for C_p(G_μ) (DRS 2019, Thm. 4.2): f_p and f_p^{-1} from the
// exact G_μ on a grid (f_p^{-1} by bisection), their minimum, and its lower convex hull
// by checking every chord. The hull of grid samples is above the exact hull; the
// operator on the tangent envelope is below it, by the envelope gap (<1e-4) plus the
// grid's chord error (Δα = 1/300: a few 1e-4 where curvature is high).
TEST(FdpTest, SubsamplingOperatorMatchesBruteForceHull) {
  const double mu = 2.0, p = 0.3;
  auto f = GaussianTradeoffCurve(mu, 4000);
  ASSERT_TRUE(f.ok());
  auto cp = SubsampledTradeoff(*f, p);
  ASSERT_TRUE(cp.ok());
  ExpectValidConvexCurve(*cp);
  const int n = 300;
  auto fp = [&](double a) { return p * G(mu, a) + (1 - p) * (1 - a); };
  std::vector<double> xs(n + 1), m(n + 1);
  for (int i = 0; i <= n; ++i) {
    const double t = static_cast<double>(i) / n;
    double lo = 0, hi = 1;  // f_p^{-1}(t) = inf{a : f_p(a) <= t}
    for (int it = 0; it < 100; ++it) {
      const double mid = 0.5 * (lo + hi);
      if (fp(mid) <= t) hi = mid; else lo = mid;
    }
    xs[i] = t;
    m[i] = std::min(fp(t), hi);
  }
  for (int i = 0; i <= n; ++i) {
    double hull = m[i];
    for (int j = 0; j < i; ++j) {
      for (int k = i + 1; k <= n; ++k) {
        const double w = (xs[i] - xs[j]) / (xs[k] - xs[j]);
        hull = std::min(hull, m[j] + w * (m[k] - m[j]));
      }
    }
    const double got = EvaluateTradeoff(*cp, xs[i]);
    EXPECT_LE(got, hull + 1e-12) << xs[i];
    EXPECT_GE(got, hull - 1e-3) << xs[i];
  }
  // C_p(f) is symmetric.
  TradeoffCurve inv = InverseTradeoff(*cp);
  for (double a : {0.01, 0.1, 0.4, 0.8}) {
    EXPECT_NEAR(EvaluateTradeoff(inv, a), EvaluateTradeoff(*cp, a), 1e-12);
  }
}

TEST(FdpTest, InverseOfAnAsymmetricCurveIsItsReflection) {
  auto f = GaussianTradeoffCurve(1.0, 500);
  ASSERT_TRUE(f.ok());
  auto fp = SubsampledTradeoff(*f, 1.0);  // C_1(f) = f (symmetric)
  ASSERT_TRUE(fp.ok());
  // f_p alone (asymmetric): p f + (1 − p) Id, built by hand.
  TradeoffCurve g = *f;
  for (size_t i = 0; i < g.alpha.size(); ++i) {
    g.beta[i] = 0.5 * g.beta[i] + 0.5 * (1 - g.alpha[i]);
  }
  TradeoffCurve inv = InverseTradeoff(g);
  ExpectValidConvexCurve(inv);
  // g(g^{-1}(t)) = t where g^{-1}(t) > 0, i.e. t < g(0).
  for (double t : {0.0, 0.1, 0.3, 0.6, 0.9}) {
    EXPECT_NEAR(EvaluateTradeoff(g, EvaluateTradeoff(inv, t)), t, 1e-12) << t;
  }
  TradeoffCurve twice = InverseTradeoff(inv);
  for (double a : {0.0, 0.2, 0.5, 0.8, 1.0}) {
    EXPECT_NEAR(EvaluateTradeoff(twice, a), EvaluateTradeoff(g, a), 1e-12);
  }
  // max and min with the inverse bracket both.
  TradeoffCurve hi = PointwiseMax(g, inv), lo = PointwiseMin(g, inv);
  for (double a : {0.05, 0.3, 0.7}) {
    EXPECT_DOUBLE_EQ(EvaluateTradeoff(hi, a),
                     std::max(EvaluateTradeoff(g, a), EvaluateTradeoff(inv, a)));
    EXPECT_DOUBLE_EQ(EvaluateTradeoff(lo, a),
                     std::min(EvaluateTradeoff(g, a), EvaluateTradeoff(inv, a)));
  }
}

// min_α α + G_μ(α) = 2Φ(−μ/2) (at the symmetric point α = Φ(−μ/2)).
TEST(FdpTest, MinimumErrorOfGMu) {
  for (double mu : {0.2, 0.5736, 1.0, 3.0}) {
    auto c = GaussianTradeoffCurve(mu, 2000);
    ASSERT_TRUE(c.ok());
    const double exact = 2 * Phi(-mu / 2);
    EXPECT_LE(MinimumErrorSum(*c), exact + 1e-15);
    EXPECT_GE(MinimumErrorSum(*c), exact - 1e-4);
  }
}

TEST(FdpTest, RejectsBadInputs) {
  EXPECT_FALSE(GaussianTradeoffCurve(-1).ok());
  EXPECT_FALSE(GaussianTradeoffCurve(1, 1).ok());
  EXPECT_FALSE(ApproxDpTradeoffCurve(-1, 0.1).ok());
  EXPECT_FALSE(ApproxDpTradeoffCurve(1, 1.5).ok());
  EXPECT_FALSE(SubsampledTradeoff(*ApproxDpTradeoffCurve(1, 0), 2).ok());
  EXPECT_FALSE(TradeoffFromDeltas({1.0}, {}).ok());
  EXPECT_FALSE(RdpTradeoffCurve({2.0}, {1.0}, 4).ok());
  EXPECT_EQ(GaussianTradeoffCurve(-1).error(), "mu must be finite and >= 0, got -1");
  TradeoffCurve bad{{0, 0.5, 1}, {1, 0.9, 0.1}};
  EXPECT_FALSE(CheckTradeoffCurve(bad, false).ok());
  TradeoffCurve concave{{0, 0.5, 1}, {1, 0.9, 0}};
  EXPECT_TRUE(CheckTradeoffCurve(concave, false).ok());
  EXPECT_FALSE(CheckTradeoffCurve(concave, true).ok());
}

}  // namespace
}  // namespace dpkit::accounting
