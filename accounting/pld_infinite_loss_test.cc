// The PLD bounds where a sampled step's privacy loss lies beyond the component grid
// (|loss| > kMaxLoss): Poisson-sampled Gaussian steps with a tiny noise multiplier.
//
// For the remove direction's pair P = (1-q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2) per step
// (Mironov, Talwar, Zhang 2019; Zhu, Dong, Wang 2022), the set S = {x : some coordinate
// > 1/2} of the T-fold product gives delta(eps) >= P^T(S) - e^eps Q^T(S) with
//   P^T(S) = 1 - ((1-q) Phi(1/(2s)) + q Phi(-1/(2s)))^T,   Q^T(S) = 1 - Phi(1/(2s))^T
// (hockey-stick divergence at one set; Dong, Roth, Su 2019, Prop. 2.12). At s = 1e-3,
// Q^T(S) < T e^{-125000}: delta(eps) >= 1 - (1-q)^T to rounding for every eps up to ~1e5.
// Issue 21's probe found PldDelta's certified upper bound BELOW this (q 0.01, s 0.001,
// T 100, eps 1: 0.61635 against 0.63397).
#include <cmath>
#include <cstdint>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

using ld = long double;

// The set-S lower bound above, in long double, independent of pld.cc.
ld SetLowerBound(double q, double s, int64_t steps, double eps) {
  const ld z = 1 / (2 * static_cast<ld>(s)) / std::sqrt(2.0L);
  const ld phi_hi = 1 - 0.5L * std::erfc(z);  // Phi(1/(2s))
  const ld phi_lo = 0.5L * std::erfc(z);      // Phi(-1/(2s))
  const ld t = static_cast<ld>(steps);
  const ld p_s = -std::expm1(t * std::log1p(-(q * phi_hi - q * phi_lo) - phi_lo));
  const ld q_s = -std::expm1(t * std::log1p(-phi_lo));
  return p_s - std::exp(static_cast<ld>(eps)) * q_s;
}

Event DpSgd(double q, double s, int64_t steps) { return *DpSgdEvent(q, s, steps); }

TEST(PldInfiniteLossTest, DeltaUpperBoundCountsEveryStepBeyondTheGrid) {
  for (double q : {0.01, 0.1}) {
    for (double s : {1e-3, 5e-3}) {
      for (int64_t steps : {2, 20, 100, 400}) {
        for (double eps : {0.0, 1.0}) {
          const ld exact_at_least = SetLowerBound(q, s, steps, eps);
          auto d = PldDelta(DpSgd(q, s, steps), eps);
          ASSERT_TRUE(d.ok()) << d.error_value().message;
          EXPECT_GE(static_cast<ld>(d->delta_upper), exact_at_least * (1 - 1e-12L))
              << "q " << q << " sigma " << s << " T " << steps << " eps " << eps;
          EXPECT_LE(d->delta_lower, d->delta_upper);
        }
      }
    }
  }
}

TEST(PldInfiniteLossTest, EpsilonIsInfiniteBelowTheSampledMass) {
  // delta(eps) >= 1 - (1-q)^T for every eps up to ~1e5: no finite eps at a smaller delta
  // (the RDP-free certified answer is +inf or an eps beyond that range).
  for (int64_t steps : {20, 100}) {
    const double floor = static_cast<double>(SetLowerBound(0.01, 1e-3, steps, 0));
    auto e = PldEpsilon(DpSgd(0.01, 1e-3, steps), floor * 0.98);
    ASSERT_TRUE(e.ok()) << e.error_value().message;
    EXPECT_TRUE(!std::isfinite(e->epsilon_upper) || e->epsilon_upper > 1e5) << steps;
  }
}

}  // namespace
}  // namespace dpkit::accounting
