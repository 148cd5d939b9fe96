// Asoodeh et al. 2020, RDP -> f-DP region (tools/reproduce/asoodeh_items.cc): the regions
// are ordered as the theory says and stay below the certified upper bound on the exact curve.
#include <string>
#include <utility>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/rdp.h"

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/report.h"
#include "gtest/gtest.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {
namespace {

TEST(AsoodehRegionTest, RegionsAreOrderedAndBelowTheExactCurve) {
  auto r = AsoodehRegion();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->table.json_rows.size(), 4u);
  const auto& exact = r->table.json_rows[0];
  const auto& optimal = r->table.json_rows[1];
  const auto& improved = r->table.json_rows[2];
  const auto& classic = r->table.json_rows[3];
  // Higher is tighter: classic <= improved <= optimal (the optimal region uses every
  // order at once; a single-order formula certifies a larger delta at every epsilon).
  EXPECT_LE(classic["min_error_sum"].get<double>(), improved["min_error_sum"].get<double>());
  EXPECT_LE(improved["min_error_sum"].get<double>(), optimal["min_error_sum"].get<double>());
  // At a given type I error the optimal region's value is T(x) of conversions.h (a root,
  // recomputed here); the single-order regions lie below it.
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  auto event = accounting::DpSgdEvent(256.0 / 60000, 1.1, 14063);
  ASSERT_TRUE(event.ok());
  auto rdp = accounting::ComputeRdp(*event, orders);
  ASSERT_TRUE(rdp.ok());
  for (auto [key, alpha] : {std::pair{"type_two_at_0.01", 0.01}, std::pair{"type_two_at_0.1", 0.1}}) {
    auto exact_optimal = accounting::RdpTradeoffLowerBound(orders, *rdp, alpha);
    ASSERT_TRUE(exact_optimal.ok());
    EXPECT_LE(classic[key].get<double>(), improved[key].get<double>()) << key;
    EXPECT_LE(improved[key].get<double>(), *exact_optimal) << key;
    EXPECT_NEAR(optimal[key].get<double>(), *exact_optimal, 1e-12) << key;
  }
  // Every region is a certified lower bound on the exact curve: its minimum error is
  // below the PLD accountant's certified upper bound on the exact minimum error, and the
  // PLD envelope's minimum lies in the accountant's certified interval (up to the
  // envelope's sampling, 1e-3).
  const accounting::PrivacyReport report =
      accounting::ComputeReport(*event, accounting::ReportQuantity::kEpsilon, 1e-5, {});
  ASSERT_EQ(report.pld.state, accounting::SlotState::kComputed);
  const double upper = *report.pld.value.min_error_upper;
  const double lower = *report.pld.value.min_error_lower;
  for (const auto& row : r->table.json_rows) {
    EXPECT_LE(row["min_error_sum"].get<double>(), upper) << row["curve"];
  }
  EXPECT_GE(exact["min_error_sum"].get<double>(), lower - 1e-3);
  EXPECT_GT(exact["min_error_sum"].get<double>(), optimal["min_error_sum"].get<double>());
}

}  // namespace
}  // namespace dpkit::tools::reproduce
