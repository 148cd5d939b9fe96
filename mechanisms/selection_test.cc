#include "dpkit/mechanisms/selection.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit::mechanisms {
namespace {

// Every statistical assertion: false-failure probability <= 1e-6 (chi-square at
// the Boost.Math quantile for alpha = 1e-6).
constexpr double kAlpha = 1e-6;
const std::vector<double> kScores = {1.0, 3.0, 0.0, 2.5, -1.0};

void ExpectFrequencies(const PrivateSelection& selection, const std::vector<double>& p,
                       int n, uint64_t seed) {
  SeededRandomGeneratorForTesting rng(seed);
  std::vector<double> observed(p.size(), 0.0), expected(p.size());
  for (int i = 0; i < n; ++i) observed[*selection.Select(absl::MakeConstSpan(kScores), rng)] += 1;
  for (size_t i = 0; i < p.size(); ++i) expected[i] = n * p[i];
  int dof = 0;
  const double chi2 = ChiSquareStatistic(observed, expected, 5.0, &dof);
  EXPECT_EQ(dof, static_cast<int>(p.size()) - 1);
  EXPECT_LT(chi2, ChiSquareCriticalValue(dof, kAlpha));
}

TEST(ExponentialMechanismTest, GumbelMaxFrequenciesMatchSoftmax) {
  auto selection = PrivateSelection::Create(1.2, 0.5, SelectionSampler::kExponentialGumbel);
  ASSERT_TRUE(selection.ok());
  // Softmax of eps u / (2 Delta), written out independently.
  std::vector<double> p;
  double z = 0;
  for (double u : kScores) z += std::exp(1.2 * u / 1.0);
  for (double u : kScores) p.push_back(std::exp(1.2 * u / 1.0) / z);
  auto probabilities = selection->ExponentialProbabilities(absl::MakeConstSpan(kScores));
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR((*probabilities)[i], p[i], 1e-14);
  ExpectFrequencies(*selection, p, 200000, 1);
}

TEST(ExponentialMechanismTest, MonotonicDropsTheFactorTwo) {
  auto selection =
      PrivateSelection::Create(0.6, 1.0, SelectionSampler::kExponentialGumbel, true);
  std::vector<double> p;
  double z = 0;
  for (double u : kScores) z += std::exp(0.6 * u);
  for (double u : kScores) p.push_back(std::exp(0.6 * u) / z);
  ExpectFrequencies(*selection, p, 200000, 2);
}

TEST(PermuteAndFlipTest, FrequenciesMatchEnumeratedPermuteAndFlip) {
  // The original algorithm (McKenna & Sheldon 2020, Alg. 1) enumerated exactly:
  // visit candidates in a uniformly random order, accept r with probability
  // exp(eps (u_r - u*) / (2 Delta)); the maximiser always accepts.
  const double epsilon = 1.0, sensitivity = 1.0;
  const double u_max = *std::max_element(kScores.begin(), kScores.end());
  std::vector<int> order(kScores.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> p(kScores.size(), 0.0);
  double permutations = 0;
  do {
    double reach = 1.0;
    for (int r : order) {
      const double accept = std::exp(epsilon * (kScores[r] - u_max) / (2 * sensitivity));
      p[r] += reach * accept;
      reach *= 1 - accept;
    }
    permutations += 1;
  } while (std::next_permutation(order.begin(), order.end()));
  for (double& v : p) v /= permutations;
  auto selection = PrivateSelection::Create(epsilon, sensitivity, SelectionSampler::kPermuteAndFlip);
  ExpectFrequencies(*selection, p, 200000, 3);
}

TEST(ReportNoisyMaxTest, FrequenciesMatchNumericalIntegration) {
  // P(i) = int f(x) prod_{j != i} F(x + c(u_i - u_j)) dx for Laplace(1) noise,
  // c = eps / (2 Delta), by the trapezoid rule on [-60, 60] with step 1e-3
  // (error far below the test's resolution of ~1e-3 in probability).
  const double c = 0.8 / 2.0;
  auto pdf = [](double x) { return 0.5 * std::exp(-std::fabs(x)); };
  auto cdf = [](double x) { return x < 0 ? 0.5 * std::exp(x) : 1 - 0.5 * std::exp(-x); };
  std::vector<double> p(kScores.size(), 0.0);
  for (size_t i = 0; i < kScores.size(); ++i) {
    for (double x = -60; x <= 60; x += 1e-3) {
      double v = pdf(x);
      for (size_t j = 0; j < kScores.size(); ++j) {
        if (j != i) v *= cdf(x + c * (kScores[i] - kScores[j]));
      }
      p[i] += v * 1e-3;
    }
  }
  auto selection = PrivateSelection::Create(0.8, 1.0, SelectionSampler::kReportNoisyMaxLaplace);
  ExpectFrequencies(*selection, p, 200000, 4);
}

TEST(PrivateSelectionTest, RejectsBadInput) {
  EXPECT_FALSE(PrivateSelection::Create(0, 1, SelectionSampler::kPermuteAndFlip).ok());
  EXPECT_FALSE(PrivateSelection::Create(1, -1, SelectionSampler::kPermuteAndFlip).ok());
  auto selection = PrivateSelection::Create(1, 1, SelectionSampler::kExponentialGumbel);
  SeededRandomGeneratorForTesting rng(1);
  std::vector<double> bad = {1.0, NAN};
  EXPECT_FALSE(selection->Select(absl::MakeConstSpan(bad), rng).ok());
  EXPECT_FALSE(selection->Select(absl::Span<const double>(), rng).ok());
  EXPECT_EQ(selection->event().epsilon(), 1.0);
}

TEST(PrivateSelectionTest, WorksOnAMillionFloatScoresInPlace) {
  std::vector<float> scores(1000000, 0.0f);
  scores[123456] = 1000.0f;  // overwhelming winner at eps = 1
  auto selection = PrivateSelection::Create(1.0, 1.0, SelectionSampler::kExponentialGumbel);
  SeededRandomGeneratorForTesting rng(2);
  // P(another index wins) <= 1e6 * exp(-500) (union bound): never.
  EXPECT_EQ(*selection->Select(absl::MakeConstSpan(scores), rng), 123456u);
}

// Exact law of k = 2 peeling: P(i then j) = p_i p_j / (1 - p_i), p = softmax(c u).
void ExpectTopTwoLaw(TopKMethod method, uint64_t seed) {
  const double epsilon = 2.0, sensitivity = 1.0;
  const double c = epsilon / 2 / (2 * sensitivity);
  std::vector<double> p;
  double z = 0;
  for (double u : kScores) z += std::exp(c * u);
  for (double u : kScores) p.push_back(std::exp(c * u) / z);
  const size_t m = kScores.size();
  std::vector<double> expected(m * m, 0.0), observed(m * m, 0.0);
  const int n = 200000;
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < m; ++j) {
      if (i != j) expected[i * m + j] = n * p[i] * p[j] / (1 - p[i]);
    }
  }
  auto topk = TopKSelection::Create(epsilon, 2, sensitivity, method);
  ASSERT_TRUE(topk.ok());
  SeededRandomGeneratorForTesting rng(seed);
  for (int t = 0; t < n; ++t) {
    const std::vector<size_t> s = *topk->Select(absl::MakeConstSpan(kScores), rng);
    ASSERT_EQ(s.size(), 2u);
    ASSERT_NE(s[0], s[1]);
    observed[s[0] * m + s[1]] += 1;
  }
  int dof = 0;
  const double chi2 = ChiSquareStatistic(observed, expected, 5.0, &dof);
  EXPECT_GE(dof, 10);
  EXPECT_LT(chi2, ChiSquareCriticalValue(dof, kAlpha));
}

TEST(TopKSelectionTest, PeelingFollowsSequentialExponentialMechanism) {
  ExpectTopTwoLaw(TopKMethod::kPeeling, 5);
}

TEST(TopKSelectionTest, OneShotGumbelHasTheSameLawAsPeeling) {
  ExpectTopTwoLaw(TopKMethod::kOneShotGumbel, 6);
}

TEST(TopKSelectionTest, EventIsKCompositionsOfEpsilonOverK) {
  auto topk = TopKSelection::Create(3.0, 3, 1.0, TopKMethod::kOneShotGumbel);
  const accounting::Event e = topk->event();
  EXPECT_EQ(e.kind(), accounting::EventKind::kSelfComposed);
  EXPECT_EQ(e.count(), 3);
  EXPECT_EQ(e.inner().kind(), accounting::EventKind::kBoundedRange);
  EXPECT_DOUBLE_EQ(e.inner().epsilon(), 1.0);
  EXPECT_EQ(TopKSelection::Create(3.0, 3, 1.0, TopKMethod::kPeeling)->event(), e);
  SeededRandomGeneratorForTesting rng(1);
  std::vector<double> two = {1, 2};
  EXPECT_FALSE(topk->Select(absl::MakeConstSpan(two), rng).ok());
  EXPECT_FALSE(TopKSelection::Create(1.0, 0, 1.0, TopKMethod::kPeeling).ok());
}

TEST(PrivateSelectionTest, ExponentialMechanismIsBoundedRangeOthersArePureDp) {
  auto em = PrivateSelection::Create(0.5, 1.0, SelectionSampler::kExponentialGumbel);
  EXPECT_EQ(em->event(), accounting::Event::BoundedRange(0.5).value());
  auto pf = PrivateSelection::Create(0.5, 1.0, SelectionSampler::kPermuteAndFlip);
  EXPECT_EQ(pf->event(), accounting::Event::PureDp(0.5).value());
  auto rnm = PrivateSelection::Create(0.5, 1.0, SelectionSampler::kReportNoisyMaxLaplace);
  EXPECT_EQ(rnm->event(), accounting::Event::PureDp(0.5).value());
}

TEST(PrivateSelectionTest, BoundedRangeEventRdpBoundsTheRenyiDivergenceOfWorstCasePairs) {
  // Independent check: exact Renyi divergence between the output laws on scores
  // (0, 1, ..., 1) and (1, 0, ..., 0) (every score moves by Delta = 1), for m
  // candidates, must not exceed the RDP the accountant gives the mechanism's event,
  // which must also be at most min(alpha eps^2 / 8, eps) (Cesar & Rogers 2021).
  const std::vector<double> orders = {1.5, 2, 4, 8, 32, 256};
  for (double epsilon : {0.1, 0.5, 1.0, 3.0}) {
    auto em = PrivateSelection::Create(epsilon, 1.0, SelectionSampler::kExponentialGumbel);
    auto rdp = accounting::ComputeRdp(em->event(), orders);
    ASSERT_TRUE(rdp.ok()) << rdp.error();
    for (int m : {2, 10, 1000}) {
      const double c = epsilon / 2;
      std::vector<double> p(m), q(m);
      const double zp = 1 + (m - 1) * std::exp(c), zq = std::exp(c) + (m - 1);
      p[0] = 1 / zp;
      q[0] = std::exp(c) / zq;
      for (int i = 1; i < m; ++i) {
        p[i] = std::exp(c) / zp;
        q[i] = 1 / zq;
      }
      for (size_t k = 0; k < orders.size(); ++k) {
        const double a = orders[k];
        for (int dir = 0; dir < 2; ++dir) {
          const std::vector<double>& x = dir ? p : q;
          const std::vector<double>& y = dir ? q : p;
          long double sum = 0;
          for (int i = 0; i < m; ++i) {
            sum += std::pow(static_cast<long double>(x[i]), a) *
                   std::pow(static_cast<long double>(y[i]), 1 - a);
          }
          const double divergence = static_cast<double>(std::log(sum) / (a - 1));
          EXPECT_LE(divergence, (*rdp)[k] * (1 + 1e-12)) << epsilon << " " << m << " " << a;
        }
        EXPECT_LE((*rdp)[k], std::min(a * epsilon * epsilon / 8, epsilon));
      }
    }
  }
}

}  // namespace
}  // namespace dpkit::mechanisms
