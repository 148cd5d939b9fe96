#include "dpkit/mechanisms/laplace.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit::mechanisms {
namespace {

// False-failure probability of each statistical assertion: <= 1e-6.
double LaplaceCdf(double x, double b) {
  return x < 0 ? 0.5 * std::exp(x / b) : 1.0 - 0.5 * std::exp(-x / b);
}

TEST(FillLaplaceTest, SamplesPassKolmogorovSmirnov) {
  SeededRandomGeneratorForTesting rng(21);
  std::vector<double> samples(300000);
  FillLaplace(rng, 1.7, samples.data(), samples.size());
  const double d =
      KolmogorovSmirnovStatistic(samples, [](double x) { return LaplaceCdf(x, 1.7); });
  EXPECT_LT(d, KolmogorovSmirnovCriticalValue(samples.size(), 1e-6));
}

TEST(SampleLaplaceTest, SecureSingleDrawsPassKolmogorovSmirnov) {
  auto rng = SecureRandomGenerator::Create();
  ASSERT_TRUE(rng.ok());
  std::vector<double> samples(100000);
  for (double& s : samples) s = SampleLaplace(**rng, 0.3);
  const double d =
      KolmogorovSmirnovStatistic(samples, [](double x) { return LaplaceCdf(x, 0.3); });
  EXPECT_LT(d, KolmogorovSmirnovCriticalValue(samples.size(), 1e-6));
}

TEST(FillLaplaceTest, TailBeyondTwentyScalesHasTheRightMass) {
  // P(|X| > 10 b) = e^-10 = 4.54e-5; with 2e6 draws expect 90.8; Poisson/normal
  // bound at 5.3 sd (sd = 9.5) has false-failure probability ~1.2e-7.
  SeededRandomGeneratorForTesting rng(22);
  std::vector<double> samples(2000000);
  FillLaplace(rng, 1.0, samples.data(), samples.size());
  double beyond = 0;
  for (double x : samples) beyond += std::fabs(x) > 10.0;
  const double expected = 2e6 * std::exp(-10.0);
  EXPECT_NEAR(beyond, expected, 5.3 * std::sqrt(expected));
}

}  // namespace
}  // namespace dpkit::mechanisms
