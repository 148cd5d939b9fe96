#include "dpkit/tools/accounting_report.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/gdp.h"
#include "gtest/gtest.h"

namespace dpkit::tools {
namespace {

using accounting::Event;

using accounting::ReportQuantity;
using accounting::SlotState;

TEST(AccountingReportTest, AllSelectsEveryAccountantAndRejectsUnknownNames) {
  auto all = ReportOptionsFromFlags("all");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->rdp && all->gdp && all->pld);
  auto gdp = ReportOptionsFromFlags("gdp");
  ASSERT_TRUE(gdp.ok());
  EXPECT_TRUE(gdp->gdp && !gdp->rdp && !gdp->pld);
  auto bad = ReportOptionsFromFlags("moments");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("--accountant must be one of rdp|gdp|pld|all"),
            std::string::npos);
}

TEST(AccountingReportTest, GdpComposesCltMusInQuadrature) {
  // Two DP-SGD phases with the same (q, sigma): mu^2 adds, so the report equals
  // mu_CLT of the total number of steps (Bu et al. 2020, eq. 3.1).
  Event a = *accounting::DpSgdEvent(0.01, 1.1, 300);
  Event b = *accounting::DpSgdEvent(0.01, 1.1, 700);
  Event both = *Event::Composed({a, b});
  auto report = AccountingReport(both, ReportQuantity::kEpsilon, 1e-5, "gdp");
  ASSERT_TRUE(report.ok()) << report.status();
  const double mu = *accounting::CltMu(0.01, 1.1, 1000);
  EXPECT_NEAR(report->gdp.value.mu, mu, 1e-14 * mu);
  EXPECT_TRUE(report->gdp.value.approximate);
  EXPECT_EQ(report->rdp.state, SlotState::kNotRun);
}

TEST(AccountingReportTest, GdpOfAnUnsampledGaussianIsExact) {
  // SelfComposed(Gaussian(2), 4) is exactly (sqrt(4)/2 = 1)-GDP.
  Event e = *Event::SelfComposed(*Event::Gaussian(2.0), 4);
  auto report = AccountingReport(e, ReportQuantity::kDelta, 1.0, "gdp");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ(report->gdp.value.mu, 1.0);
  EXPECT_FALSE(report->gdp.value.approximate);
  EXPECT_DOUBLE_EQ(report->gdp.value.value, *accounting::GdpDelta(1.0, 1.0));
}

TEST(AccountingReportTest, InapplicableAccountantIsMarkedUnderAllAndRejectedByName) {
  Event laplace = *Event::Laplace(2.0);
  auto all = AccountingReport(laplace, ReportQuantity::kEpsilon, 1e-5, "all");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->rdp.state, SlotState::kComputed);
  EXPECT_EQ(all->gdp.state, SlotState::kNotApplicable);
  auto named = AccountingReport(laplace, ReportQuantity::kEpsilon, 1e-5, "gdp");
  EXPECT_TRUE(absl::IsInvalidArgument(named.status()));
  EXPECT_NE(named.status().message().find("--accountant=gdp cannot account this: "),
            std::string::npos);
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
