#include "dpkit/accounting/internal/pld_loss_tails.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

// Relative tolerance of the tails: kCdfUlps long double ulps (the allowance the PMFs use),
// generously.
constexpr long double kRel = 1e-15L;

TEST(PldLossTailsTest, GaussianTailsMatchTheClosedForm) {
  // A = N(0, s^2), B = N(1, s^2): ell > t <=> o > s^2 t + 1/2.
  for (long double s : {0.5L, 1.1L, 20.0L}) {
    for (long double t : {-3.0L, -0.1L, 0.0L, 0.2L, 4.0L}) {
      const BaseTails r = GaussianTails(s, t);
      const long double o = s * s * t + 0.5L;
      const long double a_above = 0.5L * std::erfc(o / s / std::sqrt(2.0L));
      const long double b_above = 0.5L * std::erfc((o - 1) / s / std::sqrt(2.0L));
      EXPECT_NEAR(static_cast<double>(r.a_above / a_above), 1.0, 1e-12);
      EXPECT_NEAR(static_cast<double>(r.b_above / b_above), 1.0, 1e-12);
      EXPECT_NEAR(static_cast<double>(r.a_above + r.a_below), 1.0, kRel);
      EXPECT_NEAR(static_cast<double>(r.b_above + r.b_below), 1.0, kRel);
      EXPECT_EQ(r.a_err, r.a_err);  // stated (finite) argument-rounding allowances
      EXPECT_GE(r.a_err, 0);
    }
  }
  // A threshold error widens the allowance.
  EXPECT_GT(GaussianTails(1, 0.3L, 1e-6L).a_err, GaussianTails(1, 0.3L).a_err);
}

TEST(PldLossTailsTest, LaplaceTailsPutTheAtomsOnTheRightSide) {
  // Lap(0, b) vs Lap(1, b): atoms at ell = -1/b (A-mass 1/2) and 1/b (A-mass e^{-1/b}/2).
  const long double b = 2, hi = 1 / b;
  const BaseTails strict = LaplaceTails(b, hi, Threshold::kAbove);
  EXPECT_EQ(strict.a_above, 0);  // nothing strictly above the top atom
  const BaseTails inclusive = LaplaceTails(b, hi, Threshold::kAtOrAbove);
  EXPECT_NEAR(static_cast<double>(inclusive.a_above), 0.5 * std::exp(-0.5), 1e-15);
  EXPECT_NEAR(static_cast<double>(inclusive.b_above), 0.5, 1e-15);
  const BaseTails all = LaplaceTails(b, -hi, Threshold::kAtOrAbove);
  EXPECT_EQ(all.a_above, 1);
  EXPECT_EQ(all.b_above, 1);
}

TEST(PldLossTailsTest, SubsampledThresholdInvertsTheSubsamplingMap) {
  for (long double q : {1e-4L, 0.01L, 0.5L}) {
    for (long double l : {-1e-5L, 1e-6L, 0.3L, 5.0L}) {
      if (std::expm1(l) + q <= 0) continue;
      long double err = -1;
      const long double t = SubsampledThreshold(l, q, &err);
      // L = log(1 - q + q e^t) (Zhu, Dong, Wang 2022, Sec. 5) at t gives back l.
      const long double back = std::log1p(q * std::expm1(t));
      EXPECT_NEAR(static_cast<double>(back / l), 1.0, 1e-13) << "q " << static_cast<double>(q);
      EXPECT_GT(err, 0);
    }
  }
}

TEST(PldLossTailsTest, LossTailsOfBothDirectionsAreComplementaryAndMonotone) {
  const Mechanism m{Base::kGaussian, 1.0, 0.01, 0};
  for (Direction dir : {Direction::kRemove, Direction::kAdd}) {
    long double prev_sp = 2, prev_sq = 2;
    for (long double l = -0.05L; l <= 0.2L; l += 0.01L) {
      const LossTails t = LossTailsAt(m, dir, l);
      EXPECT_NEAR(static_cast<double>(t.sp + t.fp), 1.0, 1e-15);
      EXPECT_NEAR(static_cast<double>(t.sq + t.fq), 1.0, 1e-15);
      EXPECT_LE(t.sp, prev_sp);
      EXPECT_LE(t.sq, prev_sq);
      // Q(L > l) <= e^{-l} P(L > l): the loss is log(dP/dQ).
      EXPECT_LE(t.sq, std::exp(-l) * t.sp * (1 + 1e-12L));
      prev_sp = t.sp;
      prev_sq = t.sq;
    }
  }
  // Unsampled remove: the base tails at l itself.
  const Mechanism plain{Base::kGaussian, 2.0, 1.0, 0};
  const LossTails t = LossTailsAt(plain, Direction::kRemove, 0.1L);
  EXPECT_EQ(t.sp, GaussianTails(2.0L, 0.1L).b_above);
  EXPECT_EQ(t.sq, GaussianTails(2.0L, 0.1L).a_above);
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
