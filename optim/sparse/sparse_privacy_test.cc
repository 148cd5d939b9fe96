#include "dpkit/optim/sparse/sparse_privacy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/report.h"
#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"

namespace dpkit::optim::sparse {
namespace {

// The certified RDP epsilon of the sparse DP-SGD event (accounting computes it; optim
// produces the event).
absl::StatusOr<double> RdpEpsilon(const SparseDpSgdPrivacyParams& params, double delta) {
  absl::StatusOr<accounting::Event> event = SparseDpSgdEvent(params);
  if (!event.ok()) return event.status();
  accounting::Result<double> epsilon = accounting::CertifiedRdpEpsilon(*event, delta);
  if (!epsilon.ok()) return absl::InvalidArgumentError(epsilon.error());
  return *epsilon;
}

// delta(eps) of N(0, z^2) vs N(1, z^2) by direct numerical integration of the hockey
// stick divergence int max(0, p(x) - e^eps q(x)) dx (Simpson's rule in long double on
// [-40 z, 1 + 40 z], 400001 points); independent of the closed form of Balle & Wang.
long double HockeyStickDelta(double z, double eps) {
  const long double lo = -40.0L * z, hi = 1.0L + 40.0L * z;
  const int n = 400000;
  const long double h = (hi - lo) / n;
  const long double pi = 3.141592653589793238462643383279L;
  auto f = [&](long double x) {
    const long double p = std::exp(-(x - 1) * (x - 1) / (2.0L * z * z)) / (z * std::sqrt(2 * pi));
    const long double q = std::exp(-x * x / (2.0L * z * z)) / (z * std::sqrt(2 * pi));
    const long double v = p - std::exp(static_cast<long double>(eps)) * q;
    return v > 0 ? v : 0.0L;
  };
  long double sum = f(lo) + f(hi);
  for (int i = 1; i < n; ++i) sum += (i % 2 ? 4 : 2) * f(lo + i * h);
  return sum * h / 3;
}

TEST(AnalyticGaussianEpsilonTest, MatchesNumericalHockeyStickDivergence) {
  for (double z : {0.8, 1.0, 2.0}) {
    for (double delta : {1e-3, 1e-5}) {
      auto eps = AnalyticGaussianEpsilon(z, delta);
      ASSERT_TRUE(eps.ok());
      // At eps the divergence is delta; slightly below eps it exceeds delta. The
      // quadrature's relative error (~1e-9: the integrand's kink at the crossing
      // point limits Simpson to O(h^2)) is below the 1e-6 margins used here.
      EXPECT_LE(HockeyStickDelta(z, *eps), delta * (1 + 1e-6)) << z << " " << delta;
      EXPECT_GT(HockeyStickDelta(z, *eps * (1 - 1e-4)), delta * (1 + 1e-6)) << z;
    }
  }
}

TEST(AnalyticGaussianEpsilonTest, IsZeroWhenNoiseIsHuge) {
  // delta(0) = 2 Phi(1/(2z)) - 1 ~ 0.004 for z = 100 < 0.01.
  auto eps = AnalyticGaussianEpsilon(100.0, 0.01);
  ASSERT_TRUE(eps.ok());
  EXPECT_EQ(*eps, 0.0);
}

SparseDpSgdPrivacyParams PaperLikeParams() {
  SparseDpSgdPrivacyParams p;
  p.sampling_rate = 0.005;
  p.noise_multiplier = 1.0;
  p.selection_epsilon_per_pick = 0.01;
  p.selection_picks = 10;
  p.selection_bounded_range = true;
  p.steps = 5000;
  return p;
}

TEST(SparsePrivacyTest, RdpBoundIsTighterThanStrongComposition) {
  auto strong = StrongCompositionEpsilon(PaperLikeParams(), 1e-5);
  auto rdp = RdpEpsilon(PaperLikeParams(), 1e-5);
  ASSERT_TRUE(strong.ok());
  ASSERT_TRUE(rdp.ok());
  EXPECT_GT(*rdp, 0);
  EXPECT_LT(*rdp, *strong);
}

TEST(SparsePrivacyTest, SelectionCostIncreasesEpsilon) {
  SparseDpSgdPrivacyParams p = PaperLikeParams();
  p.selection_epsilon_per_pick = 0;
  auto rdp_gaussian_only = RdpEpsilon(p, 1e-5);
  auto strong_gaussian_only = StrongCompositionEpsilon(p, 1e-5);
  ASSERT_TRUE(rdp_gaussian_only.ok() && strong_gaussian_only.ok());
  EXPECT_LT(*rdp_gaussian_only, *RdpEpsilon(PaperLikeParams(), 1e-5));
  EXPECT_LT(*strong_gaussian_only, *StrongCompositionEpsilon(PaperLikeParams(), 1e-5));
}

TEST(SparsePrivacyTest, BoundedRangeIsNeverLooserThanPureDp) {
  SparseDpSgdPrivacyParams p = PaperLikeParams();
  p.selection_bounded_range = false;
  EXPECT_LE(*RdpEpsilon(PaperLikeParams(), 1e-5), *RdpEpsilon(p, 1e-5));
}

TEST(SparsePrivacyTest, SingleUnsampledStepIsTheGaussianPlusSelection) {
  // T = 1, q = 1: basic composition is below advanced; the per-step delta is delta/2.
  SparseDpSgdPrivacyParams p;
  p.sampling_rate = 1.0;
  p.noise_multiplier = 2.0;
  p.selection_epsilon_per_pick = 0.25;
  p.selection_picks = 2;
  p.steps = 1;
  auto eps = StrongCompositionEpsilon(p, 1e-4);
  ASSERT_TRUE(eps.ok());
  EXPECT_NEAR(*eps, 0.5 + *AnalyticGaussianEpsilon(2.0, 0.5e-4), 1e-12);
}

TEST(SparsePrivacyTest, EventIsTheStepShapeTheLedgerRecords) {
  const SparseDpSgdPrivacyParams p = PaperLikeParams();
  auto event = SparseDpSgdEvent(p);
  ASSERT_TRUE(event.ok()) << event.status();
  auto pick = accounting::Event::BoundedRange(0.01);
  auto selection = accounting::Event::SelfComposed(*pick, 10);
  auto inner = accounting::Event::Composed({*selection, *accounting::Event::Gaussian(1.0)});
  auto step = accounting::Event::PoissonSampled(0.005, *inner);
  EXPECT_EQ(*event, *accounting::Event::SelfComposed(*step, 5000));
  SparseDpSgdPrivacyParams pure = p;
  pure.selection_bounded_range = false;
  EXPECT_EQ(SparseDpSgdEvent(pure)->inner().inner().children()[0].inner(),
            *accounting::Event::PureDp(0.01));
  EXPECT_FALSE(SparseDpSgdEvent(SparseDpSgdPrivacyParams{0.0, 1.0, 0.1, 1, false, 1}).ok());
}

// Without sampling and selection cost, one step is the Gaussian mechanism, whose RDP
// is a/(2 z^2) exactly: the epsilon is the minimum of the conversion of Balle et al.
// 2020, Thm. 21, over the default orders, written out here.
TEST(SparsePrivacyTest, RdpOfOneUnsampledStepLiesBetweenExactAndImprovedConversion) {
  SparseDpSgdPrivacyParams p;
  p.sampling_rate = 1.0;
  p.noise_multiplier = 3.0;
  p.selection_epsilon_per_pick = 0.0;
  p.steps = 1;
  const double delta = 1e-5;
  // Upper: the improved conversion (Balle et al. 2020, Thm. 21) of the Gaussian's RDP
  // a / (2 sigma^2), evaluated independently; the optimal conversion (Asoodeh et al. 2021)
  // that RdpEpsilon uses is never worse.
  double improved = INFINITY;
  for (double a : accounting::DefaultRdpOrders()) {
    improved = std::min(improved, a / 18 + std::log1p(-1 / a) -
                                      (std::log(delta) + std::log(a)) / (a - 1));
  }
  // Lower: the exact epsilon of one Gaussian with sensitivity 1 and sigma 3, i.e. mu = 1/3
  // GDP: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong, Roth, Su 2019,
  // Cor. 2.13), inverted by bisection.
  const double mu = 1.0 / 3.0;
  auto gaussian_delta = [&](double e) {
    return 0.5 * std::erfc((e / mu - mu / 2) / std::sqrt(2.0)) -
           std::exp(e) * 0.5 * std::erfc((e / mu + mu / 2) / std::sqrt(2.0));
  };
  double lo = 0, hi = 20;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (gaussian_delta(mid) > delta ? lo : hi) = mid;
  }
  const double epsilon = *RdpEpsilon(p, delta);
  EXPECT_LE(epsilon, improved * (1 + 1e-12));
  EXPECT_GE(epsilon, hi * (1 - 1e-9));
}

TEST(SparsePrivacyTest, RejectsBadParameters) {
  SparseDpSgdPrivacyParams p = PaperLikeParams();
  EXPECT_FALSE(RdpEpsilon(p, 0).ok());
  EXPECT_FALSE(StrongCompositionEpsilon(p, 1).ok());
  p.steps = 0;
  EXPECT_FALSE(RdpEpsilon(p, 1e-5).ok());
  p = PaperLikeParams();
  p.sampling_rate = 0;
  EXPECT_FALSE(StrongCompositionEpsilon(p, 1e-5).ok());
  EXPECT_FALSE(AnalyticGaussianEpsilon(-1, 1e-5).ok());
}

}  // namespace
}  // namespace dpkit::optim::sparse
