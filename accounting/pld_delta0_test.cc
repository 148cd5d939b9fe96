// delta(0) (the total variation distance, the minimum type I + type II error's complement:
// Dong, Roth, Su 2019, Prop. 2.12 at eps = 0; Bu et al. 2020, Sec. 5) as PldEpsilon bounds it
// with PldOptions::with_delta0, on the grids built for epsilon (issue 16: the report's
// minimum-error interval from the compositions already built, not from a second grid
// search). Checked against the closed form at q = 1 and, where the per-step bulk is narrow
// for the grid (Table 1 row 6, sigma 0.5), against PldDelta's own search at eps = 0; the
// gap must meet PldDelta's refinement target (10 tolerance delta), which report.cc relies
// on to skip that search.
#include <cmath>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

constexpr double kTableQ = 256.0 / 60000;

PldOptions WithDelta0() {
  PldOptions options;
  options.with_delta0 = true;
  return options;
}

// The target of PldDelta's refinement (and of report.cc): gap <= 10 tolerance delta.
void ExpectWithinTarget(const EpsilonBounds& b) {
  EXPECT_LE(b.delta0_lower, b.delta0_upper);
  EXPECT_LE(b.delta0_upper - b.delta0_lower, 10 * PldOptions().epsilon_tolerance * b.delta0_upper)
      << "[" << b.delta0_lower << ", " << b.delta0_upper << "]";
}

// T Gaussian steps of noise multiplier sigma at q = 1 are one Gaussian mechanism with
// mu = sqrt(T) / sigma, whose total variation distance is 2 Phi(mu / 2) - 1 = erf(mu / (2
// sqrt 2)) (Dong, Roth, Su 2019, Cor. 2.13 at eps = 0).
TEST(PldDelta0Test, BracketsTheClosedFormAtSamplingRateOne) {
  for (const auto& [sigma, steps] : {std::pair<double, int>{5.0, 100}, {2.0, 10}, {20.0, 1000}}) {
    const double mu = std::sqrt(static_cast<double>(steps)) / sigma;
    const double tv = std::erf(mu / (2 * std::sqrt(2.0)));
    auto b = PldEpsilon(*DpSgdEvent(1.0, sigma, steps), 1e-5, WithDelta0());
    ASSERT_TRUE(b.ok()) << b.error();
    EXPECT_LE(b->delta0_lower, tv * (1 + 1e-12)) << sigma;
    EXPECT_GE(b->delta0_upper, tv * (1 - 1e-12)) << sigma;
    ExpectWithinTarget(*b);
  }
}

// Table 1 row 2 (sigma 1.1) and row 6 (sigma 0.5, where the compositions' optimistic PMFs
// lose the narrow bulk: [0.8394, 0.9218] before the decomposed bound gave delta(0) too).
// Both intervals are certified, so they must overlap; each must meet the target.
TEST(PldDelta0Test, EpsilonsGridsMeetTheTargetAndAgreeWithTheOwnSearch) {
  for (const auto& [sigma, steps] : {std::pair<double, int>{1.1, 14063}, {0.5, 23438}}) {
    const Event event = *DpSgdEvent(kTableQ, sigma, steps);
    auto b = PldEpsilon(event, 1e-5, WithDelta0());
    ASSERT_TRUE(b.ok()) << b.error();
    ExpectWithinTarget(*b);
    auto own = PldDelta(event, 0.0);
    ASSERT_TRUE(own.ok()) << own.error();
    EXPECT_LE(b->delta0_lower, own->delta_upper) << sigma;
    EXPECT_LE(own->delta_lower, b->delta0_upper) << sigma;
  }
}

}  // namespace
}  // namespace dpkit::accounting
