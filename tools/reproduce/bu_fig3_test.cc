// Bu et al. 2020, Fig. 3 (tools/reproduce/bu_items.cc): the 77.6% and 9.4% minimum errors
// and the moments accountant's 3.01, checked against the paper and the closed forms.
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {
namespace {

const ItemResult& Fig3() {
  static const ItemResult* const result = [] {
    auto r = BuFig3();
    EXPECT_TRUE(r.ok()) << r.status();
    return new ItemResult(r.ok() ? *r : ItemResult{});
  }();
  return *result;
}

const nlohmann::json& Row(const std::string& quantity) {
  for (const auto& row : Fig3().table.json_rows) {
    if (row["quantity"] == quantity) return row;
  }
  static const nlohmann::json* const kNull = new nlohmann::json();
  ADD_FAILURE() << "no row " << quantity;
  return *kNull;
}

// Percentages printed with one decimal: within 0.05 points.
constexpr double kOneDecimalPercent = 0.0005 + 1e-9;

TEST(BuFig3Test, MinimumErrorsAgreeWithThePaper) {
  EXPECT_TRUE(Fig3().agrees);
  const auto& clt = Row("min_error_clt");
  EXPECT_LE(std::abs(clt["dpkit"].get<double>() - 0.776), kOneDecimalPercent);
  const auto& ma = Row("min_error_ma");
  EXPECT_LE(std::abs(ma["dpkit"].get<double>() - 0.094), kOneDecimalPercent);
  const auto& eps = Row("epsilon_ma");
  EXPECT_LE(std::abs(eps["dpkit"].get<double>() - 3.01), 0.01 * 3.01);
}

// The closed forms: 2 Phi(-mu/2) for G_mu; 2 (1 - delta) / (1 + e^eps) for f_{eps,delta}
// (its kink, DRS 2019 Prop. 2.5), evaluated here independently of the item.
TEST(BuFig3Test, MinimumErrorsMatchTheirClosedForms) {
  const auto& clt = Row("min_error_clt");
  EXPECT_NEAR(clt["dpkit"].get<double>(), 1 + std::erf(-0.57 / 2 / std::sqrt(2.0)), 1e-12);
  const auto& unrounded = Row("min_error_clt_unrounded_mu");
  const double mu = 256.0 / 60000 * std::sqrt(14063 * std::expm1(1 / 1.21));
  EXPECT_NEAR(unrounded["mu"].get<double>(), mu, 1e-12 * mu);
  EXPECT_NEAR(unrounded["dpkit"].get<double>(), 1 + std::erf(-mu / 2 / std::sqrt(2.0)), 1e-12);
  const auto& ma = Row("min_error_ma");
  EXPECT_NEAR(ma["dpkit"].get<double>(),
              2 * (1 - 1e-5) / (1 + std::exp(ma["epsilon_ma"].get<double>())), 1e-15);
}

// The exact minimum error lies in the certified PLD interval, which is narrow; the
// moments accountant's certified curve can only be below it.
TEST(BuFig3Test, CertifiedIntervalIsOrderedNarrowAndAboveTheMomentsAccountant) {
  const auto& pld = Row("min_error_pld");
  const double lower = pld["lower"], upper = pld["upper"];
  EXPECT_LE(lower, upper);
  EXPECT_LT(upper - lower, 2e-3);
  EXPECT_LE(Row("min_error_ma")["dpkit"].get<double>(), upper);
}

TEST(BuFig3Test, FigureDrawsTheThreeCurvesOnTheUnitSquare) {
  const Figure& f = Fig3().figure;
  ASSERT_EQ(f.series.size(), 3u);
  for (const Series& s : f.series) {
    ASSERT_EQ(s.x.size(), s.y.size());
    EXPECT_NEAR(s.y.front(), 1.0, 1e-3) << s.name;  // type II error 1 at type I error 0
    EXPECT_NEAR(s.y.back(), 0.0, 1e-9) << s.name;
  }
}

}  // namespace
}  // namespace dpkit::tools::reproduce
