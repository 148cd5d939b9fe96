// Empirical privacy audits of dpkit's mechanisms. Each test runs a mechanism on
// neighbouring inputs many times and computes a lower bound on epsilon that holds
// with probability >= 1 - 1e-6 (tests/audit/audit.h). For a correct mechanism the
// bound exceeds the claimed epsilon with probability <= 1e-6 (the false-failure
// probability of each "correct" assertion). The same audit, with the same number
// of trials, must catch a deliberately broken variant: those assertions state the
// expected margin; seeds are fixed, so the outcome is reproducible.
#include <cmath>
#include <cstdio>
#include <vector>

#include "dpkit/accounting/gdp.h"
#include "gtest/gtest.h"
#include "dpkit/mechanisms/additive.h"
#include "dpkit/mechanisms/calibration.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/mechanisms/selection.h"
#include "dpkit/mechanisms/sparse_vector.h"
#include "dpkit/tests/audit/audit.h"

namespace dpkit {
namespace {

using audit::AuditResult;
using audit::EpsilonLowerBound;
using mechanisms::SeededRandomGeneratorForTesting;

constexpr double kBeta = 1e-6;

std::vector<double> Grid(double from, double to, double step) {
  std::vector<double> grid;
  for (double t = from; t <= to + 1e-12; t += step) grid.push_back(t);
  return grid;
}

void Report(const char* name, const AuditResult& r, double claimed) {
  std::printf("%s: epsilon_lower = %.4f (claimed %.4f) at threshold %.3f, %lld trials per input\n",
              name, r.epsilon_lower, claimed, r.best_threshold,
              static_cast<long long>(r.trials_per_input));
}

TEST(ClopperPearsonTest, MatchesKnownIntervals) {
  // k = 0: upper bound 1 - beta^(1/n) in closed form.
  EXPECT_NEAR(audit::ClopperPearsonUpper(0, 100, 0.05), 1 - std::pow(0.05, 0.01), 1e-12);
  // k = n: lower bound beta^(1/n).
  EXPECT_NEAR(audit::ClopperPearsonLower(100, 100, 0.05), std::pow(0.05, 0.01), 1e-12);
  // Bounds bracket the estimate.
  EXPECT_LT(audit::ClopperPearsonLower(30, 100, 1e-3), 0.3);
  EXPECT_GT(audit::ClopperPearsonUpper(30, 100, 1e-3), 0.3);
}

// Laplace (lattice) mechanism, eps = 1, sensitivity 1, inputs 0 and 1. 2e5 trials
// per input. The broken variant uses half the noise scale (true eps = 2): its
// audit bound is about 1.9 at these trial counts.
std::vector<double> LaplaceOutputs(double epsilon, double value, int n, uint64_t seed) {
  auto mechanism = mechanisms::LaplaceMechanism::Create(epsilon, 1.0);
  SeededRandomGeneratorForTesting rng(seed);
  std::vector<double> out(n);
  for (double& y : out) y = *mechanism->Release(value, rng);
  return out;
}

TEST(LaplaceAuditTest, BoundStaysBelowClaimAndHalfScaleIsCaught) {
  const int n = 200000;
  const std::vector<double> thresholds = Grid(-2.0, 3.0, 0.5);
  const AuditResult ok = EpsilonLowerBound(LaplaceOutputs(1.0, 0.0, n, 1),
                                           LaplaceOutputs(1.0, 1.0, n, 2), thresholds, 0, kBeta);
  Report("laplace", ok, 1.0);
  EXPECT_LE(ok.epsilon_lower, 1.0);
  EXPECT_GT(ok.epsilon_lower, 0.8);  // the audit is tight enough to be meaningful
  const AuditResult broken = EpsilonLowerBound(
      LaplaceOutputs(2.0, 0.0, n, 3), LaplaceOutputs(2.0, 1.0, n, 4), thresholds, 0, kBeta);
  Report("laplace half scale", broken, 1.0);
  EXPECT_GT(broken.epsilon_lower, 1.0);
}

// Gaussian noise as used by DP-SGD (AddGaussian), calibrated by the analytic
// Gaussian mechanism to (1, 1e-5); inputs 0 and 1; 2e6 trials per input. Broken:
// half the stddev (true eps at delta 1e-5 about 2.6); the audit sees about 1.3.
std::vector<double> GaussianOutputs(double stddev, double value, int n, uint64_t seed) {
  SeededRandomGeneratorForTesting rng(seed);
  std::vector<double> out(n, value);
  mechanisms::AddGaussian(rng, stddev, out.data(), out.size());
  return out;
}

TEST(GaussianAuditTest, BoundStaysBelowClaimAndHalfNoiseIsCaught) {
  const int n = 2000000;
  const double sigma = *accounting::AnalyticGaussianStddev(1.0, 1e-5, 1.0);
  const std::vector<double> thresholds = Grid(0.0, 5.0 * sigma, sigma / 4);
  const AuditResult ok = EpsilonLowerBound(GaussianOutputs(sigma, 1.0, n, 5),
                                           GaussianOutputs(sigma, 0.0, n, 6), thresholds, 1e-5,
                                           kBeta);
  Report("gaussian", ok, 1.0);
  EXPECT_LE(ok.epsilon_lower, 1.0);
  const AuditResult broken = EpsilonLowerBound(GaussianOutputs(sigma / 2, 1.0, n, 7),
                                               GaussianOutputs(sigma / 2, 0.0, n, 8),
                                               thresholds, 1e-5, kBeta);
  Report("gaussian half noise", broken, 1.0);
  EXPECT_GT(broken.epsilon_lower, 1.0);
}

// Lattice Gaussian release mechanism (discrete Gaussian on G*Z), same calibration,
// 2e5 trials per input: the bound stays below the claim.
TEST(GaussianAuditTest, LatticeGaussianMechanismBoundStaysBelowClaim) {
  const int n = 200000;
  const double sigma = *accounting::AnalyticGaussianStddev(1.0, 1e-5, 1.0);
  auto mechanism = mechanisms::GaussianMechanism::Create(sigma, 1.0);
  ASSERT_TRUE(mechanism.ok());
  std::vector<double> a(n), b(n);
  SeededRandomGeneratorForTesting rng(9);
  for (int i = 0; i < n; ++i) {
    a[i] = *mechanism->Release(1.0, rng);
    b[i] = *mechanism->Release(0.0, rng);
  }
  const AuditResult ok =
      EpsilonLowerBound(a, b, Grid(0.0, 4.0 * sigma, sigma / 4), 1e-5, kBeta);
  Report("lattice gaussian", ok, 1.0);
  EXPECT_LE(ok.epsilon_lower, 1.0);
}

// Exponential mechanism, eps = 1, 101 candidates: on D candidate 0 scores 0 and the
// other 100 score 1; on D' candidate 0 scores 1 and the others 0 (every score moves
// by the sensitivity 1). P(0|D')/P(0|D) = 2.69 (ln = 0.99). 3e5 trials per input.
// Broken: the factor 2 dropped on non-monotone scores (true ratio 7.2, ln 1.98).
std::vector<double> ExponentialOutputs(bool monotonic, bool neighbour, int n, uint64_t seed) {
  std::vector<double> scores(101, neighbour ? 0.0 : 1.0);
  scores[0] = neighbour ? 1.0 : 0.0;
  auto selection = mechanisms::PrivateSelection::Create(
      1.0, 1.0, mechanisms::SelectionSampler::kExponentialGumbel, monotonic);
  SeededRandomGeneratorForTesting rng(seed);
  std::vector<double> out(n);
  for (double& y : out) y = *selection->Select(absl::MakeConstSpan(scores), rng) == 0 ? 1.0 : 0.0;
  return out;
}

TEST(ExponentialMechanismAuditTest, BoundStaysBelowClaimAndMissingFactorTwoIsCaught) {
  const int n = 300000;
  const std::vector<double> thresholds = {1.0};  // the event "candidate 0 chosen"
  const AuditResult ok = EpsilonLowerBound(ExponentialOutputs(false, true, n, 10),
                                           ExponentialOutputs(false, false, n, 11), thresholds,
                                           0, kBeta);
  Report("exponential", ok, 1.0);
  EXPECT_LE(ok.epsilon_lower, 1.0);
  EXPECT_GT(ok.epsilon_lower, 0.6);
  const AuditResult broken = EpsilonLowerBound(ExponentialOutputs(true, true, n, 12),
                                               ExponentialOutputs(true, false, n, 13),
                                               thresholds, 0, kBeta);
  Report("exponential without factor 2", broken, 1.0);
  EXPECT_GT(broken.epsilon_lower, 1.0);
}

// Sparse vector, eps = 1, m = c = 20 queries, threshold 0. On D the first 10
// queries are 1 and the last 10 are 0; on D' the reverse (each query moves by the
// sensitivity 1, in opposite directions, so that shifting the threshold cannot
// explain the difference). Statistic: positives among the first 10 minus positives
// among the last 10. 2e5 trials per input.
// Broken variant: AboveThreshold's noise (rho ~ Lap(2/eps), nu ~ Lap(4/eps)) kept
// for up to c positives, the threshold noise never refreshed and the query noise not
// scaled by c (Lyu, Su, Li 2017, Sec. 3: not eps-DP; its loss grows with c).
constexpr int kSvtQueries = 20;

double LaplaceDraw(SeededRandomGeneratorForTesting& rng, double scale) {
  const double magnitude = -scale * std::log(1.0 - rng.UniformDouble());
  return (rng.NextUint64() & 1) ? -magnitude : magnitude;
}

std::vector<double> SvtQueries(bool neighbour) {
  std::vector<double> q(kSvtQueries);
  for (int i = 0; i < kSvtQueries; ++i) q[i] = ((i < kSvtQueries / 2) != neighbour) ? 1.0 : 0.0;
  return q;
}

double SplitStatistic(const std::vector<size_t>& positives) {
  double y = 0;
  for (size_t i : positives) y += i < kSvtQueries / 2 ? 1.0 : -1.0;
  return y;
}

std::vector<double> BrokenSvtOutputs(bool neighbour, int n, uint64_t seed) {
  SeededRandomGeneratorForTesting rng(seed);
  const std::vector<double> queries = SvtQueries(neighbour);
  std::vector<double> out(n);
  for (double& y : out) {
    const double rho = LaplaceDraw(rng, 2.0);  // drawn once, never refreshed
    std::vector<size_t> positives;
    for (int i = 0; i < kSvtQueries && positives.size() < kSvtQueries; ++i) {
      if (queries[i] + LaplaceDraw(rng, 4.0) >= rho) positives.push_back(i);
    }
    y = SplitStatistic(positives);
  }
  return out;
}

std::vector<double> SvtOutputs(bool neighbour, int n, uint64_t seed) {
  auto svt = mechanisms::SparseVector::Create(1.0, 0.0, kSvtQueries, 1.0, false);
  SeededRandomGeneratorForTesting rng(seed);
  const std::vector<double> queries = SvtQueries(neighbour);
  std::vector<double> out(n);
  for (double& y : out) y = SplitStatistic(svt->Run(absl::MakeConstSpan(queries), rng)->indices);
  return out;
}

TEST(SparseVectorAuditTest, BoundStaysBelowClaimAndUnrefreshedThresholdIsCaught) {
  const int n = 200000;
  const std::vector<double> thresholds = Grid(-10.0, 10.0, 1.0);
  const AuditResult ok = EpsilonLowerBound(SvtOutputs(false, n, 20), SvtOutputs(true, n, 21),
                                           thresholds, 0, kBeta);
  Report("sparse vector", ok, 1.0);
  EXPECT_LE(ok.epsilon_lower, 1.0);
  const AuditResult broken = EpsilonLowerBound(BrokenSvtOutputs(false, n, 22),
                                               BrokenSvtOutputs(true, n, 23), thresholds, 0,
                                               kBeta);
  Report("sparse vector without threshold refresh", broken, 1.0);
  EXPECT_GT(broken.epsilon_lower, 1.0);
}

}  // namespace
}  // namespace dpkit
