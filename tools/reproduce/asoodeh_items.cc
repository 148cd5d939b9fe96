// Asoodeh, Liao, Calmon, Kosut, Sankar 2020 ("A better bound gives a hundred rounds";
// the journal version: "Three variants of differential privacy: lossless conversion and
// applications", 2021): how many more DP-SGD steps the optimal RDP -> (eps, delta)
// conversion allows, and the RDP -> f-DP region beside the exact tradeoff curve.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {
namespace {

using nlohmann::json;
using accounting::RdpConversion;

constexpr double kQ = 256 / kMnistSize;
constexpr double kSigma = 1.1;
constexpr double kDelta = 1e-5;
constexpr int64_t kMaxSteps = 100000000;

enum class Conversion { kClassic, kImproved, kOptimal };
const char* ConversionLabel(Conversion c) {
  switch (c) {
    case Conversion::kClassic: return "classic (Mironov 2017)";
    case Conversion::kImproved: return "improved (Balle et al. 2020)";
    default: return "optimal (Asoodeh et al.)";
  }
}

// Epsilon after `steps` steps: RDP composes linearly (Mironov 2017, Prop. 1).
absl::StatusOr<double> EpsilonAfter(const std::vector<double>& orders,
                                    const std::vector<double>& step_rdp, int64_t steps,
                                    Conversion conversion) {
  std::vector<double> rdp(step_rdp);
  for (double& r : rdp) r *= static_cast<double>(steps);
  if (conversion == Conversion::kOptimal) {
    ASSIGN_OR_RETURN(accounting::RdpEpsilon e,
                     accounting::RdpToEpsilonOptimal(orders, rdp, kDelta));
    return e.epsilon;
  }
  ASSIGN_OR_RETURN(accounting::RdpEpsilon e,
                   accounting::RdpToEpsilon(orders, rdp, kDelta,
                                            conversion == Conversion::kClassic
                                                ? RdpConversion::kClassic
                                                : RdpConversion::kImproved));
  return e.epsilon;
}

// The largest T with epsilon(T) <= target (0 when even one step exceeds it): epsilon
// increases with T, so doubling then bisection.
absl::StatusOr<int64_t> MaxSteps(const std::vector<double>& orders,
                                 const std::vector<double>& step_rdp, double target,
                                 Conversion conversion) {
  int64_t good = 0, bad = 1;
  while (bad <= kMaxSteps) {
    ASSIGN_OR_RETURN(double e, EpsilonAfter(orders, step_rdp, bad, conversion));
    if (e > target) break;
    good = bad;
    bad *= 2;
  }
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    ASSIGN_OR_RETURN(double e, EpsilonAfter(orders, step_rdp, mid, conversion));
    (e <= target ? good : bad) = mid;
  }
  return good;
}

// f_{eps, delta(eps)} over an epsilon grid (DRS 2019, Prop. 2.12): the tradeoff region
// an (eps, delta(eps)) curve certifies, here from RDP by a single-order formula.
absl::StatusOr<accounting::TradeoffCurve> RegionFromFormula(const std::vector<double>& orders,
                                                            const std::vector<double>& rdp,
                                                            RdpConversion conversion) {
  std::vector<double> epsilons, deltas;
  for (int i = 0; i <= 400; ++i) {
    const double epsilon = 0.025 * i;
    ASSIGN_OR_RETURN(accounting::RdpDelta d,
                     accounting::RdpToDelta(orders, rdp, epsilon, conversion));
    epsilons.push_back(epsilon);
    deltas.push_back(d.delta);
  }
  ASSIGN_OR_RETURN(accounting::TradeoffCurve curve,
                   accounting::TradeoffFromDeltas(epsilons, deltas));
  return curve;
}

}  // namespace

absl::StatusOr<ItemResult> AsoodehIterations() {
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  ASSIGN_OR_RETURN(accounting::Event gaussian, accounting::Event::Gaussian(kSigma));
  ASSIGN_OR_RETURN(accounting::Event step, accounting::Event::PoissonSampled(kQ, gaussian));
  ASSIGN_OR_RETURN(std::vector<double> step_rdp, accounting::ComputeRdp(step, orders));
  ItemResult result;
  result.table.columns = {"epsilon", "max steps: classic", "improved", "optimal",
                          "optimal / classic"};
  result.figure = Figure{
      "Asoodeh et al. 2020: maximum DP-SGD steps at (eps, 1e-5), p = 256/60000, sigma 1.1",
      "epsilon", "maximum number of steps", false, false, {}};
  result.figure.legend = LegendCorner::kTopLeft;
  const Conversion conversions[] = {Conversion::kClassic, Conversion::kImproved,
                                    Conversion::kOptimal};
  for (Conversion c : conversions) {
    result.figure.series.push_back(Series{ConversionLabel(c), {}, {}, false, true});
  }
  for (double target : {0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0}) {
    int64_t max_steps[3];
    for (int i = 0; i < 3; ++i) {
      ASSIGN_OR_RETURN(max_steps[i], MaxSteps(orders, step_rdp, target, conversions[i]));
      result.figure.series[i].x.push_back(target);
      result.figure.series[i].y.push_back(static_cast<double>(max_steps[i]));
    }
    result.table.rows.push_back(
        {absl::StrFormat("%g", target), absl::StrCat(max_steps[0]), absl::StrCat(max_steps[1]),
         absl::StrCat(max_steps[2]),
         max_steps[0] > 0
             ? absl::StrFormat("%.3f", static_cast<double>(max_steps[2]) / max_steps[0])
             : std::string("-")});
    result.table.json_rows.push_back({{"epsilon", target},
                                      {"max_steps_classic", max_steps[0]},
                                      {"max_steps_improved", max_steps[1]},
                                      {"max_steps_optimal", max_steps[2]}});
  }
  result.notes = absl::StrCat(
      "DP-SGD with Poisson rate p = 256/60000 (MNIST, batch 256) and noise multiplier 1.1, "
      "delta = 1e-5; RDP at dpkit's ", orders.size(),
      " default orders. Each column is the largest T whose certified epsilon (the RDP "
      "curve of T steps, converted) stays at or below the target. Asoodeh et al.'s figure "
      "uses its own settings and prints no table, so the check is against independent "
      "computations (tools/reproduce/asoodeh_iterations_test.cc): the classic column against "
      "its closed form max over orders of (eps - log(1/delta)/(alpha - 1)) / rdp_1(alpha), "
      "and every column against the conversion at T and T + 1.");
  return result;
}

absl::StatusOr<ItemResult> AsoodehRegion() {
  const double q = kQ;
  const int64_t steps = static_cast<int64_t>(std::ceil(60 / q));
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  ASSIGN_OR_RETURN(accounting::Event event, accounting::DpSgdEvent(q, kSigma, steps));
  ASSIGN_OR_RETURN(std::vector<double> rdp, accounting::ComputeRdp(event, orders));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve exact, accounting::PldTradeoffCurve(event));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve optimal, accounting::RdpTradeoffCurve(orders, rdp));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve improved,
                   RegionFromFormula(orders, rdp, RdpConversion::kImproved));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve classic,
                   RegionFromFormula(orders, rdp, RdpConversion::kClassic));
  struct Named {
    const char* name;
    const accounting::TradeoffCurve* curve;
  };
  const Named curves[] = {{"exact (PLD, certified lower envelope)", &exact},
                          {"RDP, optimal region (Asoodeh et al.)", &optimal},
                          {"RDP, improved conversion (Balle et al. 2020)", &improved},
                          {"RDP, classic conversion (Mironov 2017)", &classic}};
  ItemResult result;
  result.table.columns = {"curve", "min type I + II error", "type II at type I 0.01",
                          "type II at type I 0.1"};
  result.figure = Figure{"Asoodeh et al.: RDP -> f-DP regions, MNIST sigma 1.1, 60 epochs",
                         "type I error", "type II error", false, false, {}};
  for (const Named& c : curves) {
    const double min_error = accounting::MinimumErrorSum(*c.curve);
    // The optimal region's value at a point is its own root (conversions.h), tighter than
    // the 400-sample envelope drawn (which lies up to ~2e-4 below it at 0.01).
    auto at = [&](double alpha) -> absl::StatusOr<double> {
      if (c.curve != &optimal) return accounting::EvaluateTradeoff(*c.curve, alpha);
      ASSIGN_OR_RETURN(double t, accounting::RdpTradeoffLowerBound(orders, rdp, alpha));
      return t;
    };
    ASSIGN_OR_RETURN(const double at_001, at(0.01));
    ASSIGN_OR_RETURN(const double at_01, at(0.1));
    // Every curve is a certified lower bound on the exact one: printed rounded down.
    result.table.rows.push_back({c.name, FixedDown(min_error, 4), FixedDown(at_001, 4),
                                 FixedDown(at_01, 4)});
    result.table.json_rows.push_back({{"curve", c.name},
                                      {"min_error_sum", min_error},
                                      {"type_two_at_0.01", at_001},
                                      {"type_two_at_0.1", at_01},
                                      {"certified_lower_bound", true}});
    Series s{c.name, {}, {}};
    for (int i = 0; i <= 200; ++i) {
      s.x.push_back(i / 200.0);
      s.y.push_back(accounting::EvaluateTradeoff(*c.curve, i / 200.0));
    }
    result.figure.series.push_back(std::move(s));
  }
  result.notes = absl::StrCat(
      "DP-SGD on MNIST: p = 256/60000, sigma 1.1, ", steps,
      " steps (60 epochs). Every curve is a certified LOWER bound on the mechanism's "
      "tradeoff curve (any test's type II error is above it), so higher is tighter: the "
      "optimal RDP region (all orders at once) lies above the regions the improved and "
      "classic conversions certify, and below the exact curve, which dpkit certifies from "
      "the PLD. The paper prints no number for this setting; the check is the ordering "
      "and the exact curve's agreement with the PLD accountant's minimum error "
      "(tools/reproduce/asoodeh_region_test.cc).");
  return result;
}

}  // namespace dpkit::tools::reproduce
