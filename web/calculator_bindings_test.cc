#include "web/calculator_bindings.h"

#include <cmath>
#include <limits>
#include <string>

#include "accounting/rdp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dpkit::web {
namespace {

using Json = ::nlohmann::json;

Json Call(const Json& request) { return Json::parse(HandleRequest(request.dump())); }

Json Table1Request(double sigma, int epochs) {
  // Bu et al. 2020, Table 1: MNIST, p = 256/60000, delta = 1e-5, steps = epochs / p rounded.
  const double q = 256.0 / 60000.0;
  return Json{{"op", "epsilon"},
              {"sampling_rate", q},
              {"noise_multiplier", sigma},
              {"steps", std::llround(epochs * 60000.0 / 256.0)},
              {"delta", 1e-5},
              {"accountants", {"gdp"}}};
}

TEST(CalculatorBindingsTest, MalformedJsonIsAnErrorMessage) {
  Json reply = Json::parse(HandleRequest("{not json"));
  EXPECT_FALSE(reply["ok"].get<bool>());
  EXPECT_EQ(reply["error"], "request is not valid JSON");
}

TEST(CalculatorBindingsTest, UnknownOperationIsNamed) {
  Json reply = Call({{"op", "bogus"}});
  EXPECT_FALSE(reply["ok"].get<bool>());
  EXPECT_EQ(reply["error"], "unknown op \"bogus\"");
}

TEST(CalculatorBindingsTest, MissingFieldIsNamed) {
  Json request = Table1Request(1.1, 60);
  request.erase("delta");
  Json reply = Call(request);
  EXPECT_FALSE(reply["ok"].get<bool>());
  EXPECT_EQ(reply["error"], "delta is required");
}

TEST(CalculatorBindingsTest, OutOfRangeNoiseMultiplierNamesParameterAndRange) {
  Json request = Table1Request(1.1, 60);
  request["noise_multiplier"] = -1;
  Json reply = Call(request);
  ASSERT_FALSE(reply["ok"].get<bool>());
  const std::string message = reply["error"];
  EXPECT_NE(message.find("noise_multiplier"), std::string::npos) << message;
  EXPECT_NE(message.find("> 0"), std::string::npos) << message;
}

TEST(CalculatorBindingsTest, DeltaOutsideOpenUnitIntervalIsRejected) {
  for (double delta : {0.0, 1.0, -1e-5, 2.0}) {
    Json request = Table1Request(1.1, 60);
    request["delta"] = delta;
    Json reply = Call(request);
    ASSERT_FALSE(reply["ok"].get<bool>()) << delta;
    EXPECT_NE(reply["error"].get<std::string>().find("delta must be in (0, 1)"),
              std::string::npos);
  }
}

TEST(CalculatorBindingsTest, FractionalStepsAreRejected) {
  Json request = Table1Request(1.1, 60);
  request["steps"] = 10.5;
  Json reply = Call(request);
  ASSERT_FALSE(reply["ok"].get<bool>());
  EXPECT_EQ(reply["error"], "steps must be an integer >= 1");
}

TEST(CalculatorBindingsTest, GdpMuMatchesTable1OfBuEtAl) {
  // Published mu (Bu et al. 2020, Table 1), printed to 2 decimals: agreement to +-0.005.
  const struct {
    double sigma;
    int epochs;
    double mu;
  } rows[] = {{1.3, 15, 0.23}, {1.1, 60, 0.57}, {0.7, 45, 1.13},
              {0.6, 62, 2.00}, {0.55, 68, 2.76}, {0.5, 100, 4.78}};
  for (const auto& row : rows) {
    Json reply = Call(Table1Request(row.sigma, row.epochs));
    ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
    const Json& gdp = reply["result"]["gdp"];
    EXPECT_NEAR(gdp["mu"].get<double>(), row.mu, 0.005 + 1e-12) << row.sigma;
    EXPECT_TRUE(gdp["approximate"].get<bool>());
  }
}

TEST(CalculatorBindingsTest, GdpMinimumErrorIsTwicePhiOfMinusHalfMu) {
  // Independent closed form 2 Phi(-mu/2) = erfc(mu / (2 sqrt 2)) from the reply's mu;
  // both sides are double evaluations of smooth functions: 1e-12 relative.
  Json reply = Call(Table1Request(1.1, 60));
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  const Json& gdp = reply["result"]["gdp"];
  const double mu = gdp["mu"];
  const double expected = std::erfc(mu / (2.0 * std::sqrt(2.0)));
  EXPECT_NEAR(gdp["min_error"].get<double>(), expected, 1e-12 * expected);
  // Bu et al. 2020, Sec. 3 quote 77.6 % for this row, from mu rounded to 0.57; our
  // mu = 0.5736 gives 77.43 %, so the published figure is matched to 0.25 points.
  EXPECT_NEAR(gdp["min_error"].get<double>(), 0.776, 0.0025);
}

TEST(CalculatorBindingsTest, RdpAtFullBatchMatchesGaussianClosedFormAndImprovedConversion) {
  // q = 1: T Gaussian steps have RDP T a / (2 sigma^2) exactly (Mironov 2017, Prop. 7).
  // Independent evaluation of the improved conversion (Balle et al. 2020, Thm. 21)
  // eps = min_a rdp(a) + log(1 - 1/a) - (log delta + log a) / (a - 1), in long double over
  // the default order grid; double vs long double rounding: 1e-12 relative.
  const double sigma = 2.0, delta = 1e-6;
  const int steps = 10;
  Json reply = Call({{"op", "epsilon"}, {"sampling_rate", 1.0}, {"noise_multiplier", sigma},
                     {"steps", steps}, {"delta", delta}, {"accountants", {"rdp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  long double best = std::numeric_limits<long double>::infinity();
  double best_order = 0;
  for (double order : accounting::DefaultRdpOrders()) {
    const long double a = order;
    const long double eps = steps * a / (2.0L * sigma * sigma) + std::log1p(-1.0L / a) -
                            (std::log(static_cast<long double>(delta)) + std::log(a)) / (a - 1);
    if (eps < best) {
      best = eps;
      best_order = order;
    }
  }
  const Json& rdp = reply["result"]["rdp"];
  EXPECT_NEAR(rdp["epsilon"].get<double>(), static_cast<double>(best), 1e-12 * best);
  EXPECT_EQ(rdp["order"].get<double>(), best_order);
  EXPECT_EQ(rdp["conversion"], "improved");
  const double eps = rdp["epsilon"];
  EXPECT_NEAR(rdp["min_error"].get<double>(), 2 * (1 - delta) / (1 + std::exp(eps)), 1e-15);
}

TEST(CalculatorBindingsTest, GdpAtFullBatchIsExactNotApproximate) {
  // q = 1: T Gaussians are exactly sqrt(T)/sigma-GDP (Dong, Roth, Su 2019, Cor. 3.3).
  Json reply = Call({{"op", "epsilon"}, {"sampling_rate", 1.0}, {"noise_multiplier", 2.0},
                     {"steps", 16}, {"delta", 1e-5}, {"accountants", {"gdp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  EXPECT_DOUBLE_EQ(reply["result"]["gdp"]["mu"].get<double>(), 2.0);
  EXPECT_FALSE(reply["result"]["gdp"]["approximate"].get<bool>());
}

TEST(CalculatorBindingsTest, TradeoffCurvesMatchClosedForms) {
  Json reply = Call({{"op", "tradeoff"}, {"mu", 1.0}, {"epsilon", 1.0}, {"delta", 0.01},
                     {"points", 11}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  const Json& r = reply["result"];
  ASSERT_EQ(r["alpha"].size(), 11u);
  // Endpoints: G_mu(0) = 1, G_mu(1) = 0; f_{eps,delta}(0) = 1 - delta.
  EXPECT_DOUBLE_EQ(r["gdp"][0].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["gdp"][10].get<double>(), 0.0);
  EXPECT_NEAR(r["approx_dp"][0].get<double>(), 0.99, 1e-15);
  // alpha = 0.5: G_1(0.5) = Phi(-1) = erfc(1/sqrt 2)/2 (1e-12: double evaluation).
  EXPECT_NEAR(r["gdp"][5].get<double>(), 0.5 * std::erfc(1.0 / std::sqrt(2.0)), 1e-12);
  // f_{1,0.01}(0.5) = max(0, 0.99 - 0.5 e, e^-1 (0.49)) = 0.49 / e.
  EXPECT_NEAR(r["approx_dp"][5].get<double>(), 0.49 * std::exp(-1.0), 1e-15);
  EXPECT_NEAR(r["approx_dp_min_error"].get<double>(), 2 * 0.99 / (1 + std::exp(1.0)), 1e-15);
}

TEST(CalculatorBindingsTest, TradeoffAcceptsExplicitAlphas) {
  Json reply = Call({{"op", "tradeoff"}, {"mu", 0.0}, {"epsilon", 0.0}, {"delta", 0.0},
                     {"alphas", {0.25, 0.75}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  // mu = 0 and eps = delta = 0 are perfect privacy: beta = 1 - alpha.
  EXPECT_NEAR(reply["result"]["gdp"][0].get<double>(), 0.75, 1e-15);
  EXPECT_NEAR(reply["result"]["approx_dp"][1].get<double>(), 0.25, 1e-15);
}

TEST(CalculatorBindingsTest, CalibrationMeetsTheTargetAndIsNearlySmallest) {
  for (const char* accountant : {"gdp", "rdp"}) {
    SCOPED_TRACE(accountant);
    const double q = 256.0 / 60000.0;
    Json reply = Call({{"op", "calibrate"}, {"target_epsilon", 2.0}, {"delta", 1e-5},
                       {"sampling_rate", q}, {"steps", 14063}, {"accountant", accountant}});
    ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
    const double sigma = reply["result"]["noise_multiplier"];
    EXPECT_GT(sigma, 1.1);  // eps(sigma = 1.1) > 2 for both, and eps falls as sigma grows.
    // Re-account through the epsilon operation: the returned sigma meets the target, and
    // sigma * (1 - 0.1 %) does not (the calibration contract of //accounting:calibrate).
    auto epsilon_at = [&](double s) {
      Json check = Call({{"op", "epsilon"}, {"sampling_rate", q}, {"noise_multiplier", s},
                         {"steps", 14063}, {"delta", 1e-5}, {"accountants", {accountant}}});
      return check["result"][accountant]["epsilon"].get<double>();
    };
    EXPECT_LE(epsilon_at(sigma), 2.0);
    EXPECT_GT(epsilon_at(sigma * (1 - 1e-3)), 2.0);
    EXPECT_DOUBLE_EQ(reply["result"]["epsilon"].get<double>(), epsilon_at(sigma));
  }
}

TEST(CalculatorBindingsTest, CalibrationRejectsUnknownAccountant) {
  Json reply = Call({{"op", "calibrate"}, {"target_epsilon", 2.0}, {"delta", 1e-5},
                     {"sampling_rate", 0.01}, {"steps", 100}, {"accountant", "bogus"}});
  ASSERT_FALSE(reply["ok"].get<bool>());
  EXPECT_EQ(reply["error"].get<std::string>().rfind("accountant must be one of: ", 0), 0u);
}

TEST(CalculatorBindingsTest, TradeoffRejectsTooManyPoints) {
  Json reply = Call({{"op", "tradeoff"}, {"mu", 1.0}, {"epsilon", 1.0}, {"delta", 0.01},
                     {"points", 1000000}});
  ASSERT_FALSE(reply["ok"].get<bool>());
  EXPECT_EQ(reply["error"], "points must be an integer in [2, 4001]");
}

}  // namespace
}  // namespace dpkit::web
