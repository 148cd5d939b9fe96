#include "dpkit/accounting/report.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "dpkit/accounting/event.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting {
namespace {

using nlohmann::json;

// Bu et al. 2020, Table 1 row 2: p = 256/60000, sigma = 1.1, 60 epochs, delta = 1e-5.
Event Table1Row2() { return *DpSgdEvent(256.0 / 60000, 1.1, 14063); }

TEST(ReportTest, HeadlineIsTheSmallestCertifiedBoundNamed) {
  PrivacyReport report = ComputeReport(Table1Row2(), ReportQuantity::kEpsilon, 1e-5, {});
  ASSERT_EQ(report.rdp.state, SlotState::kComputed) << report.rdp.message;
  ASSERT_EQ(report.pld.state, SlotState::kComputed) << report.pld.message;
  ASSERT_EQ(report.gdp.state, SlotState::kComputed) << report.gdp.message;
  EXPECT_TRUE(report.gdp.value.approximate);
  auto headline = ReportHeadline(report);
  ASSERT_TRUE(headline.has_value());
  // PLD is tighter than RDP here; the approximate GDP value (below both) never heads.
  EXPECT_EQ(headline->accountant, "pld");
  EXPECT_EQ(headline->value, report.pld.value.upper);
  EXPECT_LT(report.pld.value.upper, report.rdp.value.value);
  EXPECT_LT(report.gdp.value.value, headline->value);
}

TEST(ReportTest, ExactGdpCanHeadAReport) {
  // q = 1: T Gaussians are exactly (sqrt(T)/sigma)-GDP, a certified bound.
  ReportOptions options;
  options.pld = false;
  PrivacyReport report =
      ComputeReport(*DpSgdEvent(1.0, 1.0, 100), ReportQuantity::kEpsilon, 1e-5, options);
  ASSERT_EQ(report.gdp.state, SlotState::kComputed);
  EXPECT_FALSE(report.gdp.value.approximate);
  auto headline = ReportHeadline(report);
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->accountant, "gdp");
}

TEST(ReportTest, JsonHasTheCliShapeAndRoundTrips) {
  PrivacyReport report = ComputeReport(Table1Row2(), ReportQuantity::kEpsilon, 1e-5, {});
  json j = ReportToJson(report);
  for (const char* key : {"epsilon", "order", "conversion", "min_error_lower"}) {
    EXPECT_TRUE(j["rdp"].contains(key)) << key;
  }
  for (const char* key : {"epsilon", "epsilon_upper", "epsilon_lower", "discretization_interval",
                          "gap", "min_error_lower", "min_error_upper"}) {
    EXPECT_TRUE(j["pld"].contains(key)) << key;
  }
  for (const char* key : {"mu", "epsilon", "approximate", "min_error"}) {
    EXPECT_TRUE(j["gdp"].contains(key)) << key;
  }
  EXPECT_EQ(j["headline"]["accountant"], "pld");
  EXPECT_EQ(j["headline"]["epsilon"], j["pld"]["epsilon_upper"]);
  auto back = ReportFromJson(j, ReportQuantity::kEpsilon, 1e-5);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(ReportToJson(*back), j);
}

TEST(ReportTest, NotApplicableAccountantsAreRecordedNotFatal) {
  PrivacyReport report = ComputeReport(*Event::Laplace(1.0), ReportQuantity::kEpsilon, 1e-5, {});
  EXPECT_EQ(report.gdp.state, SlotState::kNotApplicable);
  EXPECT_NE(report.gdp.message.find("laplace"), std::string::npos);
  EXPECT_EQ(ReportToJson(report)["gdp"]["not_applicable"], report.gdp.message);
  EXPECT_NE(ReportToText(report).find("gdp: not applicable: "), std::string::npos);
}

TEST(ReportTest, TextPutsTheHeadlineFirstAndApproximateGdpLast) {
  PrivacyReport report = ComputeReport(Table1Row2(), ReportQuantity::kEpsilon, 1e-5, {});
  const std::string text = ReportToText(report);
  EXPECT_EQ(text.find("headline: epsilon <= "), 0u) << text;
  const size_t pld = text.find("\npld: epsilon = ");
  const size_t rdp = text.find("\nrdp: epsilon = ");
  const size_t gdp = text.find("\ngdp: epsilon = ");
  ASSERT_NE(pld, std::string::npos);
  ASSERT_NE(rdp, std::string::npos);
  ASSERT_NE(gdp, std::string::npos);
  EXPECT_LT(pld, rdp);
  EXPECT_LT(rdp, gdp);
  EXPECT_NE(text.find("CLT APPROXIMATION, not an upper bound", gdp), std::string::npos);
  // The printed headline parses to at least the certified bound (outward rounding).
  const double printed = std::strtod(text.c_str() + std::string("headline: epsilon <= ").size(),
                                     nullptr);
  EXPECT_GE(printed, report.pld.value.upper);
  // And the printed lower bound to at most the certified lower bound.
  const size_t lower_at = text.find("exact value >= ") + std::string("exact value >= ").size();
  EXPECT_LE(std::strtod(text.c_str() + lower_at, nullptr), report.pld.value.lower);
}

// Issue 21, soundness 3: at q = 1e-6, sigma = 0.5, T = 1e7, delta = 1e-15 PLD certifies
// epsilon <= 4.3046 and no lower bound; "exact value >= 0" read as a measured lower bound.
TEST(ReportTest, AZeroLowerBoundIsLabelledAsNone) {
  PrivacyReport report = ComputeReport(Table1Row2(), ReportQuantity::kEpsilon, 1e-5, {});
  ASSERT_EQ(report.pld.state, SlotState::kComputed) << report.pld.message;
  EXPECT_EQ(ReportToText(report).find("no lower bound"), std::string::npos);
  EXPECT_FALSE(ReportToJson(report)["pld"].contains("no_lower_bound"));
  report.pld.value.lower = 0;
  const std::string text = ReportToText(report);
  EXPECT_NE(text.find("pld: epsilon = "), std::string::npos) << text;
  EXPECT_NE(text.find("(certified upper bound; no lower bound certified)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("exact value >= 0"), std::string::npos) << text;
  const json j = ReportToJson(report);
  EXPECT_EQ(j["pld"]["no_lower_bound"], true);
  EXPECT_EQ(j["pld"]["epsilon_lower"], 0.0);
  auto back = ReportFromJson(j, ReportQuantity::kEpsilon, 1e-5);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(ReportToJson(*back), j);
}

TEST(ReportTest, LineNamesTheHeadlineAndRoundsItUp) {
  ReportOptions options;
  options.min_errors = false;
  PrivacyReport report = ComputeReport(Table1Row2(), ReportQuantity::kEpsilon, 1e-5, options);
  const std::string line = ReportToLine(report);
  EXPECT_EQ(line.find("eps <= "), 0u) << line;
  EXPECT_NE(line.find("(PLD, delta=1e-05; RDP "), std::string::npos) << line;
  EXPECT_NE(line.find("(approximate, not a bound)"), std::string::npos) << line;
  EXPECT_GE(std::strtod(line.c_str() + 7, nullptr), report.pld.value.upper);
}

TEST(ReportTest, DeltaReportsUseDeltaKeys) {
  PrivacyReport report = ComputeReport(Table1Row2(), ReportQuantity::kDelta, 2.0, {});
  json j = ReportToJson(report);
  EXPECT_TRUE(j["rdp"].contains("delta"));
  EXPECT_TRUE(j["pld"].contains("delta_upper"));
  EXPECT_TRUE(j["gdp"].contains("delta"));
  EXPECT_TRUE(j["headline"].contains("delta"));
  EXPECT_LE(j["pld"]["delta_lower"].get<double>(), j["pld"]["delta_upper"].get<double>());
}

TEST(ReportTest, EmptyRunIsEpsilonZero) {
  PrivacyReport report = EmptyRunReport(ReportQuantity::kEpsilon, 1e-5);
  json j = ReportToJson(report);
  EXPECT_EQ(j["rdp"]["epsilon"], 0.0);
  EXPECT_TRUE(j["rdp"]["order"].is_null());
  EXPECT_EQ(ReportHeadline(report)->value, 0.0);
}

TEST(ReportTest, TinyNoiseGivesInfiniteOrHugeBoundsWithoutFailing) {
  // Issue 21: sigma 1e-20 at q = 1 used to abort the CLI's text formatting.
  PrivacyReport report =
      ComputeReport(*DpSgdEvent(1.0, 1e-20, 1), ReportQuantity::kEpsilon, 1e-5, {});
  const std::string text = ReportToText(report);
  EXPECT_EQ(text.find("headline: epsilon <= "), 0u) << text;
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  EXPECT_EQ(report.gdp.state, SlotState::kNotApplicable);
  EXPECT_EQ(ReportHeadline(report)->accountant, "rdp");
  EXPECT_EQ(ReportToJson(report)["pld"]["infinite"], true);
}

}  // namespace
}  // namespace dpkit::accounting
