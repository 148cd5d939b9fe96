// Asoodeh et al. 2020, maximum DP-SGD iterations (tools/reproduce/asoodeh_items.cc): each
// column is the largest T the conversion allows, checked at T and T + 1 and, for the
// classic conversion, against its closed form.
#include <cmath>
#include <cstdint>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/rdp.h"
#include "gtest/gtest.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {
namespace {

constexpr double kDelta = 1e-5;

class AsoodehIterationsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto r = AsoodehIterations();
    ASSERT_TRUE(r.ok()) << r.status();
    result_ = new ItemResult(*r);
    orders_ = new std::vector<double>(accounting::DefaultRdpOrders());
    auto gaussian = accounting::Event::Gaussian(1.1);
    auto step = accounting::Event::PoissonSampled(256.0 / 60000, *gaussian);
    auto rdp = accounting::ComputeRdp(*step, *orders_);
    ASSERT_TRUE(rdp.ok());
    step_rdp_ = new std::vector<double>(*rdp);
  }
  static std::vector<double> RdpAfter(int64_t steps) {
    std::vector<double> rdp(*step_rdp_);
    for (double& r : rdp) r *= static_cast<double>(steps);
    return rdp;
  }
  static ItemResult* result_;
  static std::vector<double>* orders_;
  static std::vector<double>* step_rdp_;
};
ItemResult* AsoodehIterationsTest::result_ = nullptr;
std::vector<double>* AsoodehIterationsTest::orders_ = nullptr;
std::vector<double>* AsoodehIterationsTest::step_rdp_ = nullptr;

// Classic conversion (Mironov 2017, Prop. 3): T rdp_1(alpha) + log(1/delta)/(alpha - 1) <=
// eps, so T_max = max over orders of floor((eps - log(1/delta)/(alpha - 1)) / rdp_1(alpha)).
// Equal up to one step (the floor of a quotient vs the conversion's own rounding).
TEST_F(AsoodehIterationsTest, ClassicColumnMatchesItsClosedForm) {
  for (const auto& row : result_->table.json_rows) {
    const double epsilon = row["epsilon"];
    double best = 0;
    for (size_t i = 0; i < orders_->size(); ++i) {
      const double room = epsilon - std::log(1 / kDelta) / ((*orders_)[i] - 1);
      if (room > 0 && (*step_rdp_)[i] > 0) best = std::fmax(best, std::floor(room / (*step_rdp_)[i]));
    }
    EXPECT_LE(std::abs(row["max_steps_classic"].get<double>() - best), 1) << epsilon;
  }
}

TEST_F(AsoodehIterationsTest, EveryColumnIsTheLargestStepCountWithinTheBudget) {
  for (const auto& row : result_->table.json_rows) {
    const double epsilon = row["epsilon"];
    const int64_t classic = row["max_steps_classic"], improved = row["max_steps_improved"],
                  optimal = row["max_steps_optimal"];
    // The conversions are ordered: classic <= improved <= optimal (each certifies a
    // smaller epsilon for the same RDP curve).
    EXPECT_LE(classic, improved);
    EXPECT_LE(improved, optimal);
    for (auto [steps, conversion] : {std::pair{improved, accounting::RdpConversion::kImproved},
                                     std::pair{classic, accounting::RdpConversion::kClassic}}) {
      if (steps > 0) {
        auto at = accounting::RdpToEpsilon(*orders_, RdpAfter(steps), kDelta, conversion);
        ASSERT_TRUE(at.ok());
        EXPECT_LE(at->epsilon, epsilon);
      }
      auto next = accounting::RdpToEpsilon(*orders_, RdpAfter(steps + 1), kDelta, conversion);
      ASSERT_TRUE(next.ok());
      EXPECT_GT(next->epsilon, epsilon);
    }
    if (optimal > 0) {
      auto at = accounting::RdpToEpsilonOptimal(*orders_, RdpAfter(optimal), kDelta);
      ASSERT_TRUE(at.ok());
      EXPECT_LE(at->epsilon, epsilon);
    }
    auto next = accounting::RdpToEpsilonOptimal(*orders_, RdpAfter(optimal + 1), kDelta);
    ASSERT_TRUE(next.ok());
    EXPECT_GT(next->epsilon, epsilon);
  }
}

}  // namespace
}  // namespace dpkit::tools::reproduce
