// Bu et al. 2020, general CLT for a heterogeneous schedule (tools/reproduce/bu_items.cc):
// the paper prints no number for one, so the checks are independent computations.
#include <cmath>

#include "dpkit/accounting/gdp.h"
#include "gtest/gtest.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {
namespace {

TEST(BuGeneralCltTest, AgreesWithIndependentComputations) {
  auto r = BuGeneralClt();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->agrees);
  double sum_of_squares = 0;
  // The largest p e^{1/sigma^2} of the phases: the order of the general CLT's departure
  // from eq. 3.1's limit (accounting/gdp_general_clt_test.cc measures it linear in p).
  double departure = 0;
  const nlohmann::json* whole = nullptr;
  for (const auto& row : r->table.json_rows) {
    if (row.contains("run")) {
      whole = &row;
      continue;
    }
    const double p = row["sampling_rate"], sigma = row["sigma"];
    const int64_t steps = row["steps"];
    // Bu et al. eq. (3.1) written out.
    const double mu = p * std::sqrt(steps * std::expm1(1 / (sigma * sigma)));
    EXPECT_NEAR(row["mu_eq_3_1"].get<double>(), mu, 1e-12 * mu);
    sum_of_squares += mu * mu;
    departure = std::fmax(departure, p * std::exp(1 / (sigma * sigma)));
    EXPECT_EQ(row["approximate"], true);
  }
  ASSERT_NE(whole, nullptr);
  const double mu = std::sqrt(sum_of_squares);  // GDP composition (DRS 2019, Cor. 3.3)
  EXPECT_NEAR((*whole)["mu_eq_3_1"].get<double>(), mu, 1e-12 * mu);
  const double general = (*whole)["mu_general_clt"];
  EXPECT_LE(std::abs(general - mu), departure * mu);
  auto eps = accounting::GdpEpsilon(general, 1e-5);
  ASSERT_TRUE(eps.ok());
  EXPECT_NEAR((*whole)["epsilon_general_clt"].get<double>(), *eps, 1e-12 * *eps);
  const double lower = (*whole)["epsilon_pld"]["lower"], upper = (*whole)["epsilon_pld"]["upper"];
  EXPECT_LE(lower, upper);
  EXPECT_LT(upper - lower, 1e-2 * upper);
}

}  // namespace
}  // namespace dpkit::tools::reproduce
