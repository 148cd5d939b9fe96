// `dpkit sample` end to end: the printed samples pass goodness-of-fit tests against
// the stated distributions, and bad parameters give exit code 2 with one line.
// The samples come from the secure (unseeded) generator; each statistical assertion
// has false-failure probability <= 1e-6.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/statistics_testing.h"

namespace dpkit {
namespace {

using mechanisms::ChiSquareCriticalValue;
using mechanisms::ChiSquareStatistic;
using mechanisms::KolmogorovSmirnovCriticalValue;
using mechanisms::KolmogorovSmirnovStatistic;
using mechanisms::StandardNormalCdf;

constexpr double kAlpha = 1e-6;

struct Output {
  int exit_code;
  std::vector<double> values;
  std::string err;
};

Output RunDpkit(const std::string& args) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string tmp = dir != nullptr ? dir : "/tmp";
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string binary = std::string(srcdir ? srcdir : ".") + "/" +
                             (workspace ? workspace : "dpkit") + "/tools/dpkit";
  const std::string command =
      binary + " " + args + " >" + tmp + "/sample.out 2>" + tmp + "/sample.err";
  const int status = std::system(command.c_str());
  Output output;
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream out(tmp + "/sample.out");
  for (double v; out >> v;) output.values.push_back(v);
  std::ifstream err(tmp + "/sample.err");
  std::stringstream buffer;
  buffer << err.rdbuf();
  output.err = buffer.str();
  return output;
}

TEST(SampleCommandTest, GaussianSamplesPassKolmogorovSmirnov) {
  Output run = RunDpkit("sample gaussian --stddev=1.5 --count=100000");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(run.values.size(), 100000u);
  const double d = KolmogorovSmirnovStatistic(
      run.values, [](double x) { return StandardNormalCdf(x / 1.5); });
  EXPECT_LT(d, KolmogorovSmirnovCriticalValue(run.values.size(), kAlpha));
}

TEST(SampleCommandTest, LaplaceSamplesPassKolmogorovSmirnov) {
  Output run = RunDpkit("sample laplace --scale=2 --count=100000");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(run.values.size(), 100000u);
  const double d = KolmogorovSmirnovStatistic(run.values, [](double x) {
    return x < 0 ? 0.5 * std::exp(x / 2) : 1 - 0.5 * std::exp(-x / 2);
  });
  EXPECT_LT(d, KolmogorovSmirnovCriticalValue(run.values.size(), kAlpha));
}

TEST(SampleCommandTest, ExponentialChoicesMatchSoftmax) {
  // P(i) proportional to exp(eps u_i / (2 Delta)) = exp(u_i / 2) for eps = 2, Delta = 2.
  Output run = RunDpkit("sample exponential --scores=1,2,3 --epsilon=2 --sensitivity=2 "
                        "--count=60000");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(run.values.size(), 60000u);
  std::vector<double> observed(3, 0.0), expected(3);
  for (double v : run.values) observed.at(static_cast<size_t>(v)) += 1;
  const double z = std::exp(0.5) + std::exp(1.0) + std::exp(1.5);
  for (int i = 0; i < 3; ++i) expected[i] = 60000 * std::exp(0.5 * (i + 1)) / z;
  int dof = 0;
  EXPECT_LT(ChiSquareStatistic(observed, expected, 5, &dof), ChiSquareCriticalValue(2, kAlpha));
}

TEST(SampleCommandTest, DiscreteGaussianMatchesPmf) {
  Output run = RunDpkit("sample discrete-gaussian --sigma=2 --count=50000");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(run.values.size(), 50000u);
  double norm = 0;
  for (int x = -100; x <= 100; ++x) norm += std::exp(-x * x / 8.0);
  std::vector<double> observed(21, 0.0), expected(21, 0.0);  // -10..10
  for (double v : run.values) {
    ASSERT_EQ(v, std::round(v));
    if (std::fabs(v) <= 10) observed[static_cast<int>(v) + 10] += 1;
  }
  for (int x = -10; x <= 10; ++x) expected[x + 10] = 50000 * std::exp(-x * x / 8.0) / norm;
  int dof = 0;
  const double chi2 = ChiSquareStatistic(observed, expected, 5, &dof);
  EXPECT_LT(chi2, ChiSquareCriticalValue(dof, kAlpha));
}

TEST(SampleCommandTest, DiscreteLaplaceIsIntegerAndSymmetric) {
  Output run = RunDpkit("sample discrete-laplace --scale=3 --count=20000");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(run.values.size(), 20000u);
  double sum = 0;
  for (double v : run.values) {
    ASSERT_EQ(v, std::round(v));
    sum += v;
  }
  // Variance of Lap_Z(3) = 2 r / (1 - r)^2, r = e^{-1/3}; mean within 5.3 sd.
  const double r = std::exp(-1.0 / 3);
  EXPECT_NEAR(sum / 20000, 0.0, 5.3 * std::sqrt(2 * r / ((1 - r) * (1 - r)) / 20000));
}

TEST(SampleCommandTest, BadParametersExitTwoWithOneLine) {
  for (const std::string args :
       {"sample gaussian --stddev=-1", "sample gaussian", "sample laplace --scale=nan",
        "sample discrete-gaussian --sigma=0", "sample discrete-laplace --scale=1e300",
        "sample exponential --scores=1,,2 --epsilon=1", "sample exponential --scores=1,2",
        "sample exponential --scores=1,2 --epsilon=1 --sensitivity=0",
        "sample gaussian --stddev=1 --count=0", "sample gaussian --stddev=1 --scale=1",
        "sample normal --stddev=1", "sample"}) {
    SCOPED_TRACE(args);
    Output run = RunDpkit(args);
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_TRUE(run.values.empty());
  }
}

}  // namespace
}  // namespace dpkit
