#include "dpkit/mechanisms/discrete.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit::mechanisms {
namespace {

// Every statistical assertion: false-failure probability <= 1e-6.
constexpr double kAlpha = 1e-6;

TEST(BernoulliExpMinusTest, FrequenciesMatchExpOfMinusGamma) {
  // 4e5 draws per gamma; |p_hat - p| <= 5.3 sd (two-sided normal 1.2e-7).
  SeededRandomGeneratorForTesting rng(31);
  const std::vector<std::pair<int, int>> gammas = {{0, 1}, {3, 10}, {1, 1}, {27, 10}, {7, 3}};
  for (auto [num, den] : gammas) {
    const int n = 400000;
    int ones = 0;
    for (int i = 0; i < n; ++i) ones += SampleBernoulliExpMinus(rng, num, den);
    const double p = std::exp(-static_cast<double>(num) / den);
    EXPECT_NEAR(ones / static_cast<double>(n), p, 5.3 * std::sqrt(p * (1 - p) / n) + 1e-12)
        << num << "/" << den;
  }
}

TEST(DoubleToRationalTest, IsExact) {
  for (double v : {0.1, 3.0, 1e-300, 123456.789, 0x1.0p60}) {
    BigInt num, den;
    DoubleToRational(v, &num, &den);
    // v * den == num exactly, checked in integers: v = m 2^e.
    int e = 0;
    const double f = std::frexp(v, &e);
    BigInt m = static_cast<uint64_t>(std::ldexp(f, 53));
    e -= 53;
    if (e >= 0) {
      EXPECT_EQ(num * 1, (m << e) * 1);
      EXPECT_EQ(den, 1);
    } else {
      EXPECT_EQ(num << -e, m * den);
    }
  }
}

// Chi-square of integer samples against a pmf on [-range, range] (tails pooled).
void ExpectMatchesPmf(const std::vector<int64_t>& samples, const std::vector<double>& pmf,
                      int range) {
  std::vector<double> observed(2 * range + 3, 0.0), expected(2 * range + 3, 0.0);
  const double n = static_cast<double>(samples.size());
  for (int64_t x : samples) {
    if (x < -range) {
      observed[0] += 1;
    } else if (x > range) {
      observed[2 * range + 2] += 1;
    } else {
      observed[x + range + 1] += 1;
    }
  }
  double inside = 0.0;
  for (int x = -range; x <= range; ++x) {
    expected[x + range + 1] = n * pmf[x + range];
    inside += pmf[x + range];
  }
  expected[0] = expected[2 * range + 2] = n * (1.0 - inside) / 2;  // symmetric tails
  int dof = 0;
  const double chi2 = ChiSquareStatistic(observed, expected, 5.0, &dof);
  EXPECT_GE(dof, 5);
  EXPECT_LT(chi2, ChiSquareCriticalValue(dof, kAlpha)) << "dof " << dof;
}

TEST(DiscreteLaplaceSamplerTest, FrequenciesMatchPmfChiSquare) {
  for (double scale : {0.7, 2.5, 10.0 / 3.0}) {
    SeededRandomGeneratorForTesting rng(41);
    auto sampler = DiscreteLaplaceSampler::Create(scale);
    ASSERT_TRUE(sampler.ok());
    std::vector<int64_t> samples(100000);
    for (int64_t& s : samples) s = sampler->Sample(rng);
    // P(x) = (1 - e^{-1/b}) / (1 + e^{-1/b}) e^{-|x|/b} (closed form, long double).
    const int range = 60;
    std::vector<double> pmf;
    const long double r = std::exp(-1.0L / scale);
    for (int x = -range; x <= range; ++x) {
      pmf.push_back(static_cast<double>((1 - r) / (1 + r) * std::pow(r, std::abs(x))));
    }
    ExpectMatchesPmf(samples, pmf, range);
  }
}

TEST(DiscreteGaussianSamplerTest, FrequenciesMatchPmfChiSquare) {
  for (double sigma : {0.8, 3.7, 12.0}) {
    SeededRandomGeneratorForTesting rng(43);
    auto sampler = DiscreteGaussianSampler::Create(sigma);
    ASSERT_TRUE(sampler.ok());
    std::vector<int64_t> samples(100000);
    for (int64_t& s : samples) s = sampler->Sample(rng);
    // Normaliser by direct summation over |x| <= 40 sigma + 40 in long double.
    long double z = 0;
    const int far = static_cast<int>(40 * sigma) + 40;
    for (int x = -far; x <= far; ++x) z += std::exp(-0.5L * x * x / (sigma * sigma));
    const int range = static_cast<int>(6 * sigma) + 3;
    std::vector<double> pmf;
    for (int x = -range; x <= range; ++x) {
      pmf.push_back(static_cast<double>(std::exp(-0.5L * x * x / (sigma * sigma)) / z));
    }
    ExpectMatchesPmf(samples, pmf, range);
  }
}

TEST(DiscreteSamplersTest, RejectBadParameters) {
  EXPECT_FALSE(DiscreteLaplaceSampler::Create(0.0).ok());
  EXPECT_FALSE(DiscreteLaplaceSampler::Create(NAN).ok());
  EXPECT_FALSE(DiscreteLaplaceSampler::Create(1e300).ok());
  EXPECT_FALSE(DiscreteGaussianSampler::Create(-1.0).ok());
  EXPECT_FALSE(DiscreteGaussianSampler::Create(INFINITY).ok());
}

TEST(UniformBigIntBelowTest, HandlesBoundsAbove64Bits) {
  SeededRandomGeneratorForTesting rng(1);
  const BigInt bound = (BigInt(1) << 100) + 12345;
  for (int i = 0; i < 1000; ++i) {
    const BigInt x = UniformBigIntBelow(rng, bound);
    ASSERT_GE(x, 0);
    ASSERT_LT(x, bound);
  }
}

}  // namespace
}  // namespace dpkit::mechanisms
