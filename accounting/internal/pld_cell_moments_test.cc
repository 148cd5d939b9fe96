#include "dpkit/accounting/internal/pld_cell_moments.h"

#include <cmath>

#include "dpkit/accounting/internal/pld_loss_tails.h"
#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

TEST(PldCellMomentsInternalTest, GaussLegendreRulesIntegratePolynomialsExactly) {
  for (int r = 0; r < kGlRules; ++r) {
    const GaussLegendreRule& g = GlRule(r);
    EXPECT_EQ(g.n, kGlPoints[r]);
    // An n-point rule integrates x^k exactly for k <= 2n - 1: int_{-1}^{1} x^k = 2/(k+1)
    // for even k, 0 for odd k.
    for (int k = 0; k <= 2 * g.n - 1; ++k) {
      long double sum = 0;
      for (int i = 0; i < g.n; ++i) sum += g.weight[i] * std::pow(g.node[i], k);
      const long double exact = k % 2 == 0 ? 2.0L / (k + 1) : 0.0L;
      EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(exact), 1e-17) << "k " << k;
    }
  }
}

TEST(PldCellMomentsInternalTest, EnclosuresContainTheTailDifferencesOfAWideCell) {
  // On a wide cell of an unsampled Gaussian the tail differences are precise (their
  // rounding is far below the moments), so they are a reference for the quadrature.
  const long double s = 1.0L, u = 0.1L, v = 0.3L;
  CellMoments mq;
  ASSERT_TRUE(GaussianCellMoments(s, u, 0, v, 0, 1e-8L, &mq));
  // P_b = N(1, s^2) (B of the base pair), Q_b = N(0, s^2): C = P_b(I) - e^u Q_b(I).
  const BaseTails tu = GaussianTails(s, u), tv = GaussianTails(s, v);
  const long double p = tu.b_above - tv.b_above, q = tu.a_above - tv.a_above;
  const long double c = p - std::exp(u) * q, d = std::exp(v) * q - p;
  EXPECT_LE(std::fabs(mq.c - c), mq.c_err + 1e-17L);
  EXPECT_LE(std::fabs(mq.d - d), mq.d_err + 1e-17L);
  EXPECT_LT(mq.c_err, 1e-10L * mq.c);
  EXPECT_LT(mq.d_err, 1e-10L * mq.d);
}

TEST(PldCellMomentsInternalTest, RefusesCellsOutsideItsDomain) {
  CellMoments mq;
  EXPECT_FALSE(GaussianCellMoments(1, 0.3L, 0, 0.1L, 0, 1e-8L, &mq));  // v < u
  EXPECT_FALSE(GaussianCellMoments(1, 50, 0, 51, 0, 1e-8L, &mq));      // |z| > 36
  EXPECT_FALSE(GaussianCellMoments(1, 0, 0, 10, 0, 1e-8L, &mq));       // W > 4
}

TEST(PldCellMomentsInternalTest, QuadratureTriggerScalesWithTheUseCount) {
  EXPECT_EQ(QuadratureTrigger(1), 1e-8L);      // capped at 1e-8
  EXPECT_EQ(QuadratureTrigger(1e20), 1e-12L);  // at least 1e-12
  EXPECT_LT(QuadratureTrigger(1e6), QuadratureTrigger(1e5));
  // Unsampled thresholds carry only the grid value's rounding.
  const LossTails t{};
  EXPECT_EQ(GridThresholdError(1, 0, t), 0);
  EXPECT_GT(GridThresholdError(1, 0.5L, t), 0);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
