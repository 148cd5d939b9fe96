// End-to-end tests of `dpkit tradeoff` (issue 3, Sec. 2 and 4) and of the f-DP fields
// that `dpkit epsilon` gained with it (rdp "min_error_lower", gdp "min_error",
// --rdp_conversion).
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dpkit/accounting/gdp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "dpkit/tests/cli/dpkit_runner.h"

namespace {

using dpkit::testing::CliRun;
using dpkit::testing::Dpkit;
using dpkit::testing::ExpectUsageError;
using dpkit::testing::ReadFile;
using dpkit::testing::TempDir;
using nlohmann::json;

const char kSetting[] = "--sampling_rate=0.01 --noise_multiplier=1.1 --steps=1000";

struct Point {
  double alpha, beta;
};

// Parses "curve,alpha,beta" CSV into curve -> points, failing the test on bad lines.
std::map<std::string, std::vector<Point>> ParseCsv(const std::string& text) {
  std::map<std::string, std::vector<Point>> curves;
  std::istringstream in(text);
  std::string line;
  EXPECT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "curve,alpha,beta");
  while (std::getline(in, line)) {
    const size_t c1 = line.find(','), c2 = line.rfind(',');
    EXPECT_NE(c1, std::string::npos) << line;
    EXPECT_NE(c1, c2) << line;
    if (c1 == std::string::npos || c1 == c2) continue;
    size_t used = 0;
    const double alpha = std::stod(line.substr(c1 + 1, c2 - c1 - 1), &used);
    EXPECT_EQ(used, c2 - c1 - 1) << line;
    const double beta = std::stod(line.substr(c2 + 1), &used);
    EXPECT_EQ(used, line.size() - c2 - 1) << line;
    curves[line.substr(0, c1)].push_back({alpha, beta});
  }
  return curves;
}

TEST(DpkitTradeoffTest, CsvHasFourMonotoneConvexCurvesOnTheRequestedGrid) {
  CliRun run = Dpkit(std::string("tradeoff ") + kSetting + " --points=51");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(run.err.empty()) << run.err;
  auto curves = ParseCsv(run.out);
  ASSERT_EQ(curves.size(), 4u);
  for (const char* name : {"pld", "rdp", "approx_dp", "gdp_clt"}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(curves.count(name), 1u);
    const std::vector<Point>& c = curves[name];
    ASSERT_EQ(c.size(), 51u);
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_DOUBLE_EQ(c[i].alpha, i / 50.0);
      EXPECT_GE(c[i].beta, 0);
      EXPECT_LE(c[i].beta, 1 - c[i].alpha + 1e-12);  // no test beats the trivial one
      if (i > 0) {
        EXPECT_LE(c[i].beta, c[i - 1].beta) << i;  // non-increasing
      }
      // Convex: second differences >= 0 (1e-12 for the printed rounding).
      if (i > 0 && i + 1 < c.size()) {
        EXPECT_GE(c[i + 1].beta - 2 * c[i].beta + c[i - 1].beta, -1e-12) << i;
      }
    }
    EXPECT_EQ(c.back().beta, 0);
  }
  // The gdp_clt column is G_mu at mu_CLT (Bu et al. 2020, eq. 3.1), from the library.
  const double mu = *dpkit::accounting::CltMu(0.01, 1.1, 1000);
  for (const Point& p : curves["gdp_clt"]) {
    EXPECT_DOUBLE_EQ(p.beta, dpkit::accounting::GaussianTradeoff(mu, p.alpha));
  }
}

// Without subsampling the mechanism is exactly G_mu with mu = sqrt(T)/sigma
// (Gaussian mechanisms compose to G_mu with mu^2 = T / sigma^2; Dong, Roth, Su 2019, Sec. 3): the certified curves must lie below it, and the
// PLD one within 1e-3 of it.
TEST(DpkitTradeoffTest, CertifiedCurvesAreBelowTheExactGaussianCurve) {
  CliRun run = Dpkit("tradeoff --sampling_rate=1 --noise_multiplier=2 --steps=4 --points=101");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto curves = ParseCsv(run.out);
  for (const char* name : {"pld", "rdp", "approx_dp"}) {
    SCOPED_TRACE(name);
    for (const Point& p : curves[name]) {
      const double exact = dpkit::accounting::GaussianTradeoff(1.0, p.alpha);
      EXPECT_LE(p.beta, exact + 1e-12) << p.alpha;
      if (std::string(name) == "pld") {
        EXPECT_GE(p.beta, exact - 1e-3) << p.alpha;
      }
    }
  }
  for (const Point& p : curves["gdp_clt"]) {
    EXPECT_DOUBLE_EQ(p.beta, dpkit::accounting::GaussianTradeoff(1.0, p.alpha));
  }
}

TEST(DpkitTradeoffTest, SvgIsAStandalonePlotWithLegendAndLabels) {
  CliRun run = Dpkit(std::string("tradeoff ") + kSetting + " --format=svg --points=21");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& s = run.out;
  EXPECT_EQ(s.rfind("<?xml", 0), 0u);
  EXPECT_NE(s.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
  size_t polylines = 0;
  for (size_t at = s.find("<polyline"); at != std::string::npos; at = s.find("<polyline", at + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 4u);
  for (const char* label : {"PLD (certified)", "RDP-implied (certified)", "(APPROXIMATE)",
                            "type I error", "type II error", "min \u03b1+\u03b2"}) {
    EXPECT_NE(s.find(label), std::string::npos) << label;
  }
  EXPECT_EQ(s.find("http", s.find("http") + 1), std::string::npos);  // nothing external
}

// The attribute `name`="..." of the SVG element starting at `at`.
std::string Attribute(const std::string& svg, size_t at, const std::string& name) {
  const size_t end = svg.find('>', at);
  const size_t start = svg.find(" " + name + "=\"", at);
  if (start == std::string::npos || start > end) return "";
  const size_t value = start + name.size() + 3;
  return svg.substr(value, svg.find('"', value) - value);
}

TEST(DpkitTradeoffTest, SvgKeepsEveryCurveVisibleCertifiedOnTopAndMarksMinima) {
  // Large T: G_mu (CLT) lies almost on the PLD curve; both must stay visible.
  CliRun run = Dpkit(
      "tradeoff --dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 --epochs=60 "
      "--format=svg --points=51");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& s = run.out;
  std::vector<std::string> order;
  std::set<std::string> styles;
  std::map<std::string, double> widths;
  for (size_t at = s.find("<polyline"); at != std::string::npos; at = s.find("<polyline", at + 1)) {
    const std::string name = Attribute(s, at, "class");
    order.push_back(name);
    styles.insert(Attribute(s, at, "stroke-dasharray") + "/" + Attribute(s, at, "stroke-width"));
    widths[name] = std::stod(Attribute(s, at, "stroke-width"));
  }
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(styles.size(), 4u);  // every curve has its own dash pattern and width
  EXPECT_EQ(order.back(), "curve-pld");  // the certified PLD curve is drawn last (on top)
  EXPECT_EQ(order.front(), "curve-gdp_clt");  // the approximation first, underneath
  // Each curve drawn later is thinner, so none hides one drawn before.
  for (size_t i = 1; i < order.size(); ++i) EXPECT_LT(widths[order[i]], widths[order[i - 1]]);
  for (const char* curve : {"pld", "rdp", "approx_dp", "gdp_clt"}) {
    const size_t marker = s.find(std::string("<circle class=\"min-") + curve + "\"");
    ASSERT_NE(marker, std::string::npos) << curve;
    EXPECT_GT(marker, s.rfind("<polyline"));  // markers on top of all curves
  }
}

TEST(DpkitTradeoffTest, OutputFileHoldsExactlyWhatStdoutWouldShow) {
  const std::string path = TempDir() + "/tradeoff.csv";
  CliRun to_file =
      Dpkit(std::string("tradeoff ") + kSetting + " --points=11 --output=" + path);
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_TRUE(to_file.out.empty());
  CliRun to_stdout = Dpkit(std::string("tradeoff ") + kSetting + " --points=11");
  ASSERT_EQ(to_stdout.exit_code, 0);
  EXPECT_EQ(ReadFile(path), to_stdout.out);
}

TEST(DpkitTradeoffTest, BadFlagsExitTwoWithOneLine) {
  const std::string t = std::string("tradeoff ") + kSetting;
  ExpectUsageError(t + " --format=json", "--format must be one of csv|svg");
  ExpectUsageError(t + " --points=1", "--points must be an integer in [2, 100001]");
  ExpectUsageError(t + " --points=100002", "--points");
  ExpectUsageError(t + " --delta=0", "--delta must be in [1e-100, 1)");
  ExpectUsageError(t + " --output=", "--output");
  ExpectUsageError(t + " --output=/nonexistent-dir/x.csv", "--output cannot be written");
  ExpectUsageError(t + " --accountant=rdp", "accountant");  // not a tradeoff flag
  ExpectUsageError(t + " extra", "unexpected argument 'extra'");
  ExpectUsageError("tradeoff --sampling_rate=2 --noise_multiplier=1 --steps=10",
                   "--sampling_rate must be in (0, 1]");
  ExpectUsageError("tradeoff --sampling_rate=0.1 --steps=10", "--noise_multiplier");
  ExpectUsageError("tradeoff --sampling_rate=0.1 --noise_multiplier=1", "--steps");
}

// Bu et al. 2020, Sec. 5, sigma = 1.1, 60 epochs of MNIST (q = 256/60000): the paper
// quotes a minimum type I + type II error of 77.6 % by the CLT and 9.4 % from the
// moments accountant's (epsilon, delta). dpkit's certified RDP region gives a far better
// (larger) certified lower bound than 9.4 %, and the certified PLD interval sits next to
// the CLT value (2 Phi(-mu/2), mu = 0.5736: 77.43 %).
TEST(DpkitEpsilonMinErrorTest, EveryAccountantReportsTheMinimumErrorForTable1Row) {
  CliRun run = Dpkit("epsilon --dataset_size=60000 --batch_size=256 --noise_multiplier=1.1"
                     " --epochs=60 --delta=1e-5 --format=json --accountant=all");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json out = json::parse(run.out);
  const double mu = out["gdp"]["mu"].get<double>();
  EXPECT_NEAR(out["gdp"]["min_error"].get<double>(), std::erfc(mu / (2 * std::sqrt(2.0))),
              1e-15);
  EXPECT_NEAR(out["gdp"]["min_error"].get<double>(), 0.776, 0.005);  // the paper's 77.6 %
  EXPECT_EQ(out["gdp"]["approximate"], true);
  const double rdp = out["rdp"]["min_error_lower"].get<double>();
  EXPECT_EQ(out["rdp"]["conversion"], "optimal");
  EXPECT_GT(rdp, 0.094 * 7);
  EXPECT_LT(rdp, out["gdp"]["min_error"].get<double>());
}

TEST(DpkitEpsilonMinErrorTest, RdpConversionFlagSelectsTheConversion) {
  const std::string e = std::string("epsilon ") + kSetting + " --accountant=rdp --format=json";
  std::map<std::string, double> eps;
  for (const char* conversion : {"optimal", "improved", "classic"}) {
    CliRun run = Dpkit(e + " --rdp_conversion=" + conversion);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    json out = json::parse(run.out);
    EXPECT_EQ(out["rdp"]["conversion"], conversion);
    eps[conversion] = out["rdp"]["epsilon"].get<double>();
  }
  EXPECT_LE(eps["optimal"], eps["improved"]);
  EXPECT_LE(eps["improved"], eps["classic"]);
  ExpectUsageError(e + " --rdp_conversion=best",
                   "--rdp_conversion must be one of optimal|improved|classic");
}

}  // namespace
