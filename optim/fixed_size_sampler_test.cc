#include "dpkit/optim/fixed_size_sampler.h"

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <map>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"

namespace dpkit::optim {
namespace {

TEST(FixedSizeSamplerTest, ReturnsSortedDistinctIndicesOfTheRequestedSize) {
  mechanisms::SeededRandomGeneratorForTesting rng(7);
  for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 1}, {10, 10}, {1000, 37}, {60000, 256}}) {
    auto sample = FixedSizeSample(rng, n, m);
    ASSERT_TRUE(sample.ok()) << sample.status();
    ASSERT_EQ(static_cast<int64_t>(sample->size()), m);
    for (size_t i = 0; i < sample->size(); ++i) {
      EXPECT_GE((*sample)[i], 0);
      EXPECT_LT((*sample)[i], n);
      if (i > 0) {
        EXPECT_LT((*sample)[i - 1], (*sample)[i]);
      }
    }
  }
}

// Every 2-subset of 5 records is equally likely: chi-square over the 10 subsets from
// 200000 draws with a fixed seed. Critical value 55 for 9 degrees of freedom: a correct
// sampler fails with probability 1.2e-8 (for this seed it either always passes or always
// fails); Floyd's algorithm with t drawn from {0..j-1} instead of {0..j} gives chi-square
// in the thousands.
TEST(FixedSizeSamplerTest, EverySubsetIsEquallyLikely) {
  mechanisms::SeededRandomGeneratorForTesting rng(2019);
  std::map<std::vector<int64_t>, int> counts;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) {
    auto sample = FixedSizeSample(rng, 5, 2);
    ASSERT_TRUE(sample.ok());
    ++counts[*sample];
  }
  ASSERT_EQ(counts.size(), 10u);
  const double expected = kDraws / 10.0;
  double chi_square = 0;
  for (const auto& [subset, count] : counts) {
    chi_square += (count - expected) * (count - expected) / expected;
  }
  EXPECT_LT(chi_square, 55) << chi_square;
}

TEST(FixedSizeSamplerTest, RejectsInvalidSizes) {
  mechanisms::SeededRandomGeneratorForTesting rng(1);
  EXPECT_FALSE(FixedSizeSample(rng, 0, 1).ok());
  EXPECT_FALSE(FixedSizeSample(rng, 5, 0).ok());
  EXPECT_FALSE(FixedSizeSample(rng, 5, 6).ok());
}

// The ledger entry: a without-replacement sampled Gaussian whose noise multiplier is the
// replace-one one, s / (2C) for one query (two queries: McMahan et al. eq. 1).
TEST(FixedSizeSamplerTest, LedgerEntryRecordsTheReplaceOneEvent) {
  auto entry = FixedSizeSampleEntry(60000, 256, {{1.0, 2.2}});
  ASSERT_TRUE(entry.ok()) << entry.status();
  const auto& event = std::get<accounting::Event>(entry->record);
  ASSERT_EQ(event.kind(), accounting::EventKind::kSampledWithoutReplacement);
  EXPECT_EQ(event.population(), 60000);
  EXPECT_EQ(event.sample_size(), 256);
  EXPECT_DOUBLE_EQ(event.inner().noise_multiplier(), 1.1);
  auto two = FixedSizeSampleEntry(100, 10, {{1.0, 2.0}, {0.5, 1.0}});
  ASSERT_TRUE(two.ok());
  EXPECT_NEAR(std::get<accounting::Event>(two->record).inner().noise_multiplier(),
              1 / std::sqrt(2.0), 1e-15);
  EXPECT_FALSE(FixedSizeSampleEntry(10, 11, {{1.0, 1.0}}).ok());
  EXPECT_FALSE(FixedSizeSampleEntry(10, 5, {}).ok());
}

// Brute force on small cases: for n = 4 records with values in {-1/2, +1/2} (a sum query
// of replace-one sensitivity 1) and a sample of m = 2, the output of one step is the
// mixture over the 6 subsets of N(sum of the subset, z^2). For every dataset and every
// replaced record, the exact Renyi divergence of the two output mixtures (both orders,
// by quadrature) must not exceed the RDP the accountant gives the ledger's event (Wang,
// Balle, Kasiviswanathan 2019, Thm. 9) at integer orders 2..8.
TEST(FixedSizeSamplerTest, AccountantBoundsTheExactRenyiDivergenceOfSmallCases) {
  constexpr int kN = 4, kM = 2;
  std::vector<std::vector<int>> subsets;
  for (int a = 0; a < kN; ++a) {
    for (int b = a + 1; b < kN; ++b) subsets.push_back({a, b});
  }
  const std::vector<double> orders = {2, 3, 4, 5, 6, 7, 8};
  for (double z : {0.8, 1.5, 3.0}) {
    auto gaussian = accounting::Event::Gaussian(z);
    auto event = accounting::Event::SampledWithoutReplacement(kN, kM, *gaussian);
    ASSERT_TRUE(event.ok());
    auto rdp = accounting::ComputeRdp(*event, orders);
    ASSERT_TRUE(rdp.ok()) << rdp.error();
    // Means of the mixture components of dataset `values`.
    auto means = [&](const std::vector<double>& values) {
      std::vector<double> m;
      for (const auto& s : subsets) m.push_back(values[s[0]] + values[s[1]]);
      return m;
    };
    // log of the mixture density (log-sum-exp: the tails underflow a double).
    auto log_density = [&](const std::vector<double>& mu, double x) {
      double top = -INFINITY;
      for (double c : mu) top = std::fmax(top, -(x - c) * (x - c) / (2 * z * z));
      double sum = 0;
      for (double c : mu) sum += std::exp(-(x - c) * (x - c) / (2 * z * z) - top);
      return top + std::log(sum / (mu.size() * z * std::sqrt(2 * M_PI)));
    };
    double worst_ratio = 0;  // largest divergence / bound at order 2
    for (int mask = 0; mask < (1 << kN); ++mask) {
      std::vector<double> values(kN);
      for (int i = 0; i < kN; ++i) values[i] = (mask >> i & 1) ? 0.5 : -0.5;
      for (int replaced = 0; replaced < kN; ++replaced) {
        std::vector<double> other(values);
        other[replaced] = -other[replaced];
        const std::vector<double> p = means(values), q = means(other);
        // Grid on [-2 - 14z, 2 + 14z] for the trapezoid rule; log densities once per pair.
        constexpr int kPoints = 40000;
        const double lo = -2 - 14 * z, hi = 2 + 14 * z, h = (hi - lo) / kPoints;
        std::vector<double> log_p(kPoints + 1), log_q(kPoints + 1);
        for (int j = 0; j <= kPoints; ++j) {
          log_p[j] = log_density(p, lo + j * h);
          log_q[j] = log_density(q, lo + j * h);
        }
        for (size_t k = 0; k < orders.size(); ++k) {
          const double alpha = orders[k];
          // int p^alpha q^(1 - alpha) dx.
          double integral = 0;
          for (int j = 0; j <= kPoints; ++j) {
            integral += (j == 0 || j == kPoints ? 0.5 : 1) * h *
                        std::exp(alpha * log_p[j] + (1 - alpha) * log_q[j]);
          }
          const double divergence = std::log(integral) / (alpha - 1);
          EXPECT_LE(divergence, (*rdp)[k] * (1 + 1e-9) + 1e-12)
              << "z " << z << " alpha " << alpha << " mask " << mask << " replaced " << replaced;
          if (k == 0) worst_ratio = std::fmax(worst_ratio, divergence / (*rdp)[k]);
        }
      }
    }
    // The bound is not vacuous (a test that would pass for a bound of +inf is no test):
    // the worst pair reaches a fair fraction of it at order 2 (measured: 0.26 to 0.55).
    std::printf("z %g: worst divergence / bound at order 2: %.3f\n", z, worst_ratio);
    EXPECT_GT(worst_ratio, 0.1) << z;
  }
}

}  // namespace
}  // namespace dpkit::optim
