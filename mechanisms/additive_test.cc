#include "dpkit/mechanisms/additive.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit::mechanisms {
namespace {

TEST(LatticeGranularityTest, IsLargestPowerOfTwoAtMostSensitivityOver1024) {
  for (double s : {1.0, 3.0, 0.01, 1000.0, 1e-8}) {
    const double g = LatticeGranularity(s);
    int e = 0;
    EXPECT_EQ(std::frexp(g, &e), 0.5);  // a power of two
    EXPECT_LE(g, s / 1024);
    EXPECT_GT(2 * g, s / 1024);
  }
}

TEST(LaplaceMechanismTest, OutputsLieOnTheLattice) {
  auto mechanism = LaplaceMechanism::Create(0.5, 1.0);
  ASSERT_TRUE(mechanism.ok());
  SeededRandomGeneratorForTesting rng(3);
  for (int i = 0; i < 1000; ++i) {
    const double y = *mechanism->Release(0.123456789, rng);
    EXPECT_EQ(y / mechanism->granularity(), std::nearbyint(y / mechanism->granularity()));
  }
}

TEST(LaplaceMechanismTest, LowBitsOfTheInputDoNotChangeTheOutput) {
  // Mironov 2012's attack distinguishes x from x + (tiny) through the output's low
  // bits. Here both round to the same lattice point, so with the same randomness the
  // outputs are bit-identical: the output depends on the input only through r.
  auto mechanism = LaplaceMechanism::Create(1.0, 1.0);
  ASSERT_TRUE(mechanism.ok());
  SeededRandomGeneratorForTesting a(9), b(9);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(*mechanism->Release(0.25, a), *mechanism->Release(std::nextafter(0.25, 1.0), b));
  }
}

TEST(LaplaceMechanismTest, NoiseScaleIsAtMostOneIn1024AboveDeltaOverEpsilon) {
  auto mechanism = LaplaceMechanism::Create(0.5, 3.0);
  ASSERT_TRUE(mechanism.ok());
  EXPECT_GE(mechanism->noise_scale(), 3.0 / 0.5);
  EXPECT_LE(mechanism->noise_scale(), 3.0 / 0.5 * (1 + 1.0 / 1024));
  EXPECT_EQ(mechanism->event().kind(), accounting::EventKind::kPureDp);
  EXPECT_EQ(mechanism->event().epsilon(), 0.5);
}

TEST(LaplaceMechanismTest, HalfWidthCoversNoiseWithStatedProbability) {
  // 95 % interval; 20000 releases: coverage >= 0.95 - 5.3 sd (one-sided 6e-8).
  auto mechanism = LaplaceMechanism::Create(1.0, 1.0);
  ASSERT_TRUE(mechanism.ok());
  const double t = *mechanism->NoiseHalfWidth(0.95);
  SeededRandomGeneratorForTesting rng(5);
  const int n = 20000;
  int covered = 0;
  for (int i = 0; i < n; ++i) covered += std::fabs(*mechanism->Release(10.0, rng) - 10.0) <= t;
  EXPECT_GE(covered / static_cast<double>(n), 0.95 - 5.3 * std::sqrt(0.95 * 0.05 / n));
  // And it is not wildly conservative: the continuous Laplace needs b ln 20 = 3.0.
  EXPECT_LT(t, 3.1);
}

TEST(LaplaceMechanismTest, RejectsBadInput) {
  EXPECT_FALSE(LaplaceMechanism::Create(0.0, 1.0).ok());
  EXPECT_FALSE(LaplaceMechanism::Create(1.0, -1.0).ok());
  auto mechanism = LaplaceMechanism::Create(1.0, 1.0);
  SeededRandomGeneratorForTesting rng(1);
  EXPECT_FALSE(mechanism->Release(NAN, rng).ok());
  EXPECT_FALSE(mechanism->Release(1e300, rng).ok());
}

TEST(GaussianMechanismTest, EventIsTheIntegerDiscreteGaussianWithinOneIn1024OfSigmaOverDelta) {
  auto mechanism = GaussianMechanism::Create(2.0, 1.0);
  ASSERT_TRUE(mechanism.ok());
  const accounting::Event event = mechanism->event();
  // G = 2^-10 for sensitivity 1: integer sensitivity floor(1/G) + 1 = 1025 and integer
  // sigma 2/G = 2048, the units the released lattice noise is drawn in.
  EXPECT_EQ(event.kind(), accounting::EventKind::kDiscreteGaussian);
  EXPECT_EQ(mechanism->granularity(), 1.0 / 1024);
  EXPECT_EQ(event.sensitivity(), 1025);
  EXPECT_EQ(event.sigma(), 2048.0);
  const double ratio = event.sigma() / static_cast<double>(event.sensitivity());
  EXPECT_LE(ratio, 2.0);
  EXPECT_GE(ratio, 2.0 / (1 + 1.0 / 1024));
  // Sensitivity 1.5 in [1, 2): G = 2^-10 again, integer sensitivity floor(1536) + 1.
  auto other = GaussianMechanism::Create(3.0, 1.5);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->event(), accounting::Event::DiscreteGaussian(3072.0, 1537).value());
}

TEST(GaussianMechanismTest, ReleasedNoiseHasTheRequestedSpread) {
  // Variance of 1e5 releases: sd of the sample variance ~ sigma^2 sqrt(2/n);
  // bound 5.3 sd (two-sided normal approximation 1.2e-7).
  auto mechanism = GaussianMechanism::Create(2.0, 1.0);
  SeededRandomGeneratorForTesting rng(7);
  const int n = 100000;
  double sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double z = *mechanism->Release(5.0, rng) - 5.0;
    sum2 += z * z;
  }
  EXPECT_NEAR(sum2 / n, 4.0, 5.3 * 4.0 * std::sqrt(2.0 / n));
}

TEST(DiscreteMechanismsTest, ReportEventsAndRejectBadSensitivity) {
  auto laplace = DiscreteLaplaceMechanism::Create(0.25, 2);
  ASSERT_TRUE(laplace.ok());
  EXPECT_EQ(laplace->scale(), 8.0);
  EXPECT_EQ(laplace->event().epsilon(), 0.25);
  auto gaussian = DiscreteGaussianMechanism::Create(3.0, 2);
  ASSERT_TRUE(gaussian.ok());
  EXPECT_EQ(gaussian->event(), accounting::Event::DiscreteGaussian(3.0, 2).value());
  EXPECT_FALSE(DiscreteLaplaceMechanism::Create(1.0, 0).ok());
  EXPECT_FALSE(DiscreteGaussianMechanism::Create(1.0, -3).ok());
  // Discrete Laplace half-width is exact: P(|Z| > k) <= 0.05 < P(|Z| > k - 1).
  const int64_t k = *laplace->NoiseHalfWidth(0.95);
  const double r = std::exp(-1.0 / 8.0);
  auto tail = [&](double j) { return 2 * std::pow(r, j + 1) / (1 + r); };
  EXPECT_LE(tail(k), 0.05);
  EXPECT_GT(tail(k - 1), 0.05);
}

}  // namespace
}  // namespace dpkit::mechanisms
