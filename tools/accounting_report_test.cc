#include "tools/accounting_report.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "accounting/event.h"
#include "accounting/gdp.h"
#include "gtest/gtest.h"

namespace dpkit::tools {
namespace {

using accounting::Event;

TEST(AccountingReportTest, AllSelectsRdpAndGdpAndRejectsUnknownNames) {
  auto all = SelectAccountants("all");
  ASSERT_TRUE(all.ok());
  std::vector<std::string> names;
  for (const Accountant* a : *all) names.push_back(a->name);
  EXPECT_NE(std::find(names.begin(), names.end(), "rdp"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "gdp"), names.end());
  auto bad = SelectAccountants("moments");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("--accountant must be one of"), std::string::npos);
}

TEST(AccountingReportTest, GdpComposesCltMusInQuadrature) {
  // Two DP-SGD phases with the same (q, sigma): mu^2 adds, so the report equals
  // mu_CLT of the total number of steps (Bu et al. 2020, eq. 3.1).
  Event a = *accounting::DpSgdEvent(0.01, 1.1, 300);
  Event b = *accounting::DpSgdEvent(0.01, 1.1, 700);
  Event both = *Event::Composed({a, b});
  auto report = EpsilonReport(both, 1e-5, "gdp");
  ASSERT_TRUE(report.ok()) << report.status();
  const double mu = *accounting::CltMu(0.01, 1.1, 1000);
  EXPECT_NEAR((*report)["gdp"]["mu"].get<double>(), mu, 1e-14 * mu);
  EXPECT_EQ((*report)["gdp"]["approximate"], true);
  EXPECT_FALSE(report->contains("rdp"));
}

TEST(AccountingReportTest, GdpOfAnUnsampledGaussianIsExact) {
  // SelfComposed(Gaussian(2), 4) is exactly (sqrt(4)/2 = 1)-GDP.
  Event e = *Event::SelfComposed(*Event::Gaussian(2.0), 4);
  auto report = DeltaReport(e, 1.0, "gdp");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ((*report)["gdp"]["mu"].get<double>(), 1.0);
  EXPECT_EQ((*report)["gdp"]["approximate"], false);
  EXPECT_DOUBLE_EQ((*report)["gdp"]["delta"].get<double>(), *accounting::GdpDelta(1.0, 1.0));
}

TEST(AccountingReportTest, InapplicableAccountantIsMarkedUnderAllAndRejectedByName) {
  Event laplace = *Event::Laplace(2.0);
  auto all = EpsilonReport(laplace, 1e-5, "all");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE((*all)["rdp"]["epsilon"].is_number());
  EXPECT_TRUE((*all)["gdp"].contains("not_applicable"));
  EXPECT_NE(ReportToText(*all).find("gdp: not applicable"), std::string::npos);
  auto named = EpsilonReport(laplace, 1e-5, "gdp");
  EXPECT_TRUE(absl::IsInvalidArgument(named.status()));
}

absl::StatusOr<nlohmann::json> FakeEpsilon(const Event&, double delta) {
  return nlohmann::json{{"epsilon", delta * 2}};
}

TEST(AccountingReportTest, RegisteredAccountantJoinsAllAndText) {
  RegisterAccountant(Accountant{"fake_for_testing", true, &FakeEpsilon, nullptr, nullptr});
  Event e = *accounting::DpSgdEvent(0.01, 1.1, 10);
  auto report = EpsilonReport(e, 0.25, "all");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ((*report)["fake_for_testing"]["epsilon"], 0.5);
  EXPECT_NE(ReportToText(*report).find("fake_for_testing: "), std::string::npos);
  // It has no delta function: skipped under all, an error by name.
  EXPECT_TRUE(DeltaReport(e, 1.0, "all").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(DeltaReport(e, 1.0, "fake_for_testing").status()));
}

TEST(AccountingReportTest, StepsForEpochsRoundsUpAndNamesTheFlag) {
  EXPECT_EQ(*StepsForEpochs(15, 60000, 256), 3516);  // 3515.625
  EXPECT_EQ(*StepsForEpochs(1, 100, 10), 10);         // exact: no spurious +1
  EXPECT_EQ(*StepsForEpochs(0.001, 1, 1), 1);
  auto bad = StepsForEpochs(-1, 100, 10);
  EXPECT_NE(bad.status().message().find("--epochs"), std::string::npos);
  EXPECT_FALSE(StepsForEpochs(1e300, 100, 10).ok());
}

TEST(AccountingReportTest, JsonNumberNeverHoldsNanOrInf) {
  EXPECT_TRUE(JsonNumber(1.5).is_number());
  EXPECT_TRUE(JsonNumber(INFINITY).is_null());
  EXPECT_TRUE(JsonNumber(NAN).is_null());
}

}  // namespace
}  // namespace dpkit::tools
