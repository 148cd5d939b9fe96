#include "dpkit/accounting/internal/pld_delta_curve.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::accounting::pld_internal {
namespace {

// An untilted window (lambda 0, K 0) with masses 0.5 at losses 0.1 and 0.3 and 1e-4 at
// +inf: delta(eps) = 1e-4 + sum_{l > eps} 0.5 (1 - e^{eps - l}).
Composed TwoAtoms() {
  Composed c;
  c.h = 0.1;
  c.window_start = 1;
  c.n = 3;
  c.tilted = {0.5, 0.0, 0.5};
  c.lambda = 0;
  c.log_scale = 0;
  c.entry_error = 0;
  c.tilted_outside = 0;
  c.log_above_bound = -std::numeric_limits<long double>::infinity();
  c.infinity_mass = 1e-4L;
  return c;
}

long double Exact(long double eps) {
  long double d = 1e-4L;
  for (long double l : {0.1L, 0.3L}) {
    if (l > eps) d += 0.5L * (1 - std::exp(eps - l));
  }
  return d;
}

TEST(PldDeltaCurveTest, DeltaAtBracketsTheExactCurveTightly) {
  const DeltaCurve upper = MakeCurve(TwoAtoms(), Bound::kUpper);
  const DeltaCurve lower = MakeCurve(TwoAtoms(), Bound::kLower);
  for (long double eps : {-1.0L, 0.0L, 0.05L, 0.1L, 0.2L, 0.29L, 0.5L}) {
    const long double exact = Exact(eps);
    EXPECT_GE(DeltaAt(upper, eps), exact);
    EXPECT_LE(DeltaAt(lower, eps), exact);
    // The allowance is ~1e-13 of the two terms s1 and e^eps s2 (not of their
    // difference): at most 2e-11 relative to delta here.
    EXPECT_NEAR(static_cast<double>(DeltaAt(upper, eps) / exact), 1.0, 1e-10);
    EXPECT_NEAR(static_cast<double>(DeltaAt(lower, eps) / exact), 1.0, 1e-10);
  }
}

TEST(PldDeltaCurveTest, EpsilonForInvertsTheCurveFromBothSides) {
  const DeltaCurve upper = MakeCurve(TwoAtoms(), Bound::kUpper);
  const DeltaCurve lower = MakeCurve(TwoAtoms(), Bound::kLower);
  const long double delta = Exact(0.2L);
  const long double eps_up = EpsilonFor(upper, delta, 0);
  const long double eps_lo = EpsilonFor(lower, delta, eps_up);
  EXPECT_GE(eps_up, 0.2L * (1 - 1e-12L));
  EXPECT_LE(eps_lo, 0.2L);
  EXPECT_NEAR(static_cast<double>(eps_up), 0.2, 1e-10);
  EXPECT_NEAR(static_cast<double>(eps_lo), 0.2, 1e-10);
  // Beyond the +inf mass no finite epsilon reaches delta.
  EXPECT_TRUE(std::isinf(EpsilonFor(upper, 1e-5L, 0)));
  EXPECT_TRUE(std::isinf(EpsilonFor(lower, 1e-5L, 0)));
  // At delta(0) or above, epsilon is 0.
  EXPECT_EQ(EpsilonFor(upper, 0.9L, 0), 0);
  const Query q{Query::Kind::kDeltaAtEpsilon, 0.2};
  EXPECT_EQ(CurveAnswer(upper, q, 0), DeltaAt(upper, static_cast<long double>(0.2)));
}

TEST(PldDeltaCurveTest, EntryErrorsWidenBothBounds) {
  Composed c = TwoAtoms();
  c.entry_error = 1e-6L;
  const long double up = DeltaAt(MakeCurve(c, Bound::kUpper), 0.15L);
  const long double lo = DeltaAt(MakeCurve(c, Bound::kLower), 0.15L);
  EXPECT_GT(up, Exact(0.15L) + 1e-7L);
  EXPECT_LT(lo, Exact(0.15L) - 1e-7L);
}

// A window of many anchor blocks (the curve keeps its suffix sums only every kAnchor
// entries and replays the rest, see (9) in pld_delta_curve.cc), tilted, with losses wide
// enough that the offset of (8) is moved several times: DeltaAt at grid points and between
// them, asked in a scrambled order, against the sum over the entries computed directly.
Composed WideTiltedWindow(double h, int64_t start, int64_t n, long double lambda) {
  Composed c;
  c.h = h;
  c.window_start = start;
  c.n = n;
  std::mt19937_64 rng_for_test(7);
  std::uniform_real_distribution<double> unit(0, 1);
  c.tilted.resize(n);
  for (double& v : c.tilted) v = unit(rng_for_test) < 0.2 ? 0 : unit(rng_for_test) / n;
  c.lambda = lambda;
  c.log_scale = 0.25L;
  c.entry_error = 0;
  c.tilted_outside = 0;
  c.log_above_bound = -std::numeric_limits<long double>::infinity();
  c.infinity_mass = 0;
  return c;
}

long double DirectDelta(const Composed& c, long double eps) {
  long double d = 0;
  for (int64_t j = 0; j < c.n; ++j) {
    const long double l = static_cast<long double>(c.window_start + j) * c.h;
    if (l <= eps || c.tilted[j] <= 0) continue;
    const long double w = c.tilted[j] * std::exp(c.log_scale - c.lambda * l);
    d += w * -std::expm1(eps - l);
  }
  return d;
}

TEST(PldDeltaCurveTest, ReplayedSuffixSumsMatchTheDirectSumAcrossBlocksAndOffsets) {
  struct Case {
    double h;
    int64_t start, n;
    long double lambda;
  };
  // 1000 entries from -0.5 to 0.5 with a tilt; 1000 entries from -10000 to 10000 (the
  // offset moves at |l - o| > 8192).
  for (const Case& k : {Case{1e-3, -500, 1000, 3.0L}, Case{20, -500, 1000, 0.0L}}) {
    const Composed c = WideTiltedWindow(k.h, k.start, k.n, k.lambda);
    const DeltaCurve upper = MakeCurve(c, Bound::kUpper);
    const DeltaCurve lower = MakeCurve(c, Bound::kLower);
    std::vector<int64_t> order(k.n);
    for (int64_t j = 0; j < k.n; ++j) order[j] = j;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(11));
    for (int64_t j : order) {
      for (long double frac : {0.0L, 0.5L}) {
        const long double eps = (static_cast<long double>(k.start + j) + frac) * k.h;
        const long double direct = DirectDelta(c, eps);
        if (!(direct > 1e-300L)) continue;
        EXPECT_GE(DeltaAt(upper, eps), direct) << "eps " << static_cast<double>(eps);
        EXPECT_LE(DeltaAt(lower, eps), direct) << "eps " << static_cast<double>(eps);
        EXPECT_NEAR(static_cast<double>(DeltaAt(upper, eps) / direct), 1.0, 1e-9)
            << "eps " << static_cast<double>(eps);
        EXPECT_NEAR(static_cast<double>(DeltaAt(lower, eps) / direct), 1.0, 1e-9)
            << "eps " << static_cast<double>(eps);
      }
    }
    if (k.h == 20) {
      EXPECT_GT(upper.rebases, 0);
    }
  }
}

}  // namespace
}  // namespace dpkit::accounting::pld_internal
