#include "dpkit/web/calculator_bindings.h"

#include <cmath>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "dpkit/accounting/calibrate.h"
#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/accounting/report.h"
#include "dpkit/accounting/result.h"
#include "nlohmann/json.hpp"

namespace dpkit::web {
namespace {

using ::dpkit::accounting::Error;
using ::dpkit::accounting::Result;
using Json = ::nlohmann::json;

// Largest number of points of one tradeoff curve, so a request cannot exhaust memory.
constexpr int64_t kMaxTradeoffPoints = 4001;
// Largest PLD epsilon the calculator reports. In the WebAssembly build musl computes the
// long double exp and log in double, which overflows above e^709.78; the PLD accountant
// exponentiates losses up to epsilon and beyond, so its bounds are certified there only
// well below that (measured against `dpkit epsilon --accountant=pld`: the intervals agree
// up to epsilon 684 and are disjoint from 723 on). The same limit applies natively, so
// that the page and its native test behave alike.
constexpr double kMaxPldEpsilon = 600;
const char kPldRangeError[] =
    "PLD epsilon above 600 is outside the calculator's range (its WebAssembly arithmetic "
    "overflows there); use dpkit epsilon --accountant=pld";
// Smallest delta for the PLD accountant here: below it the tails it evaluates approach
// double's underflow (erfc in double underflows near 1e-308), where the WebAssembly build
// could no longer bound their rounding.
constexpr double kMinPldDelta = 1e-100;
const char kPldDeltaError[] =
    "PLD with delta below 1e-100 is outside the calculator's range (its WebAssembly "
    "arithmetic underflows there); use dpkit epsilon --accountant=pld";

Json Failure(const std::string& message) { return Json{{"ok", false}, {"error", message}}; }

// Reads a required finite number field of the request.
Result<double> GetNumber(const Json& request, const char* name) {
  auto it = request.find(name);
  if (it == request.end()) return Error{std::string(name) + " is required"};
  if (!it->is_number()) return Error{std::string(name) + " must be a number"};
  double value = it->get<double>();
  if (!std::isfinite(value)) return Error{std::string(name) + " must be finite"};
  return value;
}

// Reads a required integer field >= `minimum` (JSON numbers like 14063 or 14063.0).
Result<int64_t> GetInteger(const Json& request, const char* name, int64_t minimum) {
  Result<double> value = GetNumber(request, name);
  if (!value.ok()) return Error{value.error()};
  // 2^53: every integer below is exactly representable, which is far beyond any step count.
  if (*value != std::floor(*value) || *value < static_cast<double>(minimum) || *value > 9.0e15) {
    return Error{std::string(name) + " must be an integer >= " + std::to_string(minimum)};
  }
  return static_cast<int64_t>(*value);
}

// The accountants this build offers, in the order the page shows them.
const std::vector<std::string>& AvailableAccountants() {
  static const auto* const kNames = new std::vector<std::string>{"pld", "rdp", "gdp"};
  return *kNames;
}

bool IsAvailable(const std::string& name) {
  for (const std::string& available : AvailableAccountants()) {
    if (name == available) return true;
  }
  return false;
}

std::string AccountantRange() {
  std::string names;
  for (const std::string& name : AvailableAccountants()) {
    names += (names.empty() ? "" : ", ") + name;
  }
  return names;
}

// The accountants that can calibrate a noise multiplier in this build.
const std::vector<std::string>& CalibrationAccountants() {
  static const auto* const kNames = new std::vector<std::string>{"pld", "rdp", "gdp"};
  return *kNames;
}

bool CanCalibrate(const std::string& name) {
  for (const std::string& available : CalibrationAccountants()) {
    if (name == available) return true;
  }
  return false;
}

std::string CalibrationRange() {
  std::string names;
  for (const std::string& name : CalibrationAccountants()) {
    names += (names.empty() ? "" : ", ") + name;
  }
  return names;
}

// Reads the optional "accountants" list (default: all available).
Result<std::vector<std::string>> GetAccountants(const Json& request) {
  auto it = request.find("accountants");
  if (it == request.end()) return AvailableAccountants();
  if (!it->is_array()) return Error{"accountants must be a list of: " + AccountantRange()};
  std::vector<std::string> names;
  for (const Json& name : *it) {
    if (!name.is_string() || !IsAvailable(name.get<std::string>())) {
      return Error{"accountants must be a list of: " + AccountantRange()};
    }
    names.push_back(name.get<std::string>());
  }
  return names;
}

// Smallest type I + type II error of a mu-GDP mechanism: min_a a + G_mu(a) = 2 Phi(-mu/2),
// reached at a = Phi(-mu/2) by the symmetry of G_mu (Dong, Roth, Su 2019, Sec. 2.2;
// Bu et al. 2020, Sec. 3 quote 77.6 % for mu = 0.57). Computed as G_mu(Phi(-mu/2)) + Phi(-mu/2).
double GdpMinimumError(double mu) {
  double alpha = 0.5 * std::erfc(mu / (2.0 * std::sqrt(2.0)));  // Phi(-mu/2)
  return alpha + accounting::GaussianTradeoff(mu, alpha);
}

// Smallest type I + type II error of an (eps, delta)-DP mechanism:
// min_a a + f_{eps,delta}(a) = 2 (1 - delta) / (1 + e^eps), at a = (1 - delta)/(1 + e^eps)
// where the two linear pieces of f_{eps,delta} meet (Bu et al. 2020, eq. 2.1; Kairouz, Oh,
// Viswanath 2015, Thm. 2.1).
double ApproxDpMinimumError(double epsilon, double delta) {
  return 2.0 * (1.0 - delta) / (1.0 + std::exp(epsilon));
}

// Whether the run's PLD stays inside the calculator's range (kMaxPldEpsilon) far into its
// tails, where the tradeoff curve's composed PLD window reaches: the certified RDP upper
// bound on epsilon at delta = 1e-12 (milliseconds) is at most the limit.
bool PldInCalculatorRange(const accounting::Event& event) {
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  Result<std::vector<double>> rdp = accounting::ComputeRdp(event, orders);
  if (!rdp.ok()) return false;
  Result<accounting::RdpEpsilon> epsilon = accounting::RdpToEpsilonOptimal(orders, *rdp, 1e-12);
  return epsilon.ok() && epsilon->epsilon <= kMaxPldEpsilon;
}

// The slot of one accountant in the page's reply: its part of the accounting report's JSON
// (accounting/report.h, the same keys as `dpkit epsilon --format=json`), with a reason the
// accountant gives no number under "error" (the page's one failure key).
Json PageSlot(const Json& report, const char* name) {
  Json slot = report.value(name, Json{{"error", "not available"}});
  if (auto why = slot.find("not_applicable"); why != slot.end()) return Json{{"error", *why}};
  return slot;
}

// Marks an accountant's slot as giving no number here, with the page's message.
template <typename T>
void Refuse(accounting::AccountantSlot<T>* slot, const std::string& message) {
  slot->state = accounting::SlotState::kNotApplicable;
  slot->message = message;
}

// The calculator's range limits on a computed report (kMaxPldEpsilon, kMinPldDelta) and
// its messages for bounds that are not finite.
void ApplyCalculatorRange(accounting::PrivacyReport* report) {
  if (report->rdp.state == accounting::SlotState::kComputed &&
      !std::isfinite(report->rdp.value.value)) {
    Refuse(&report->rdp, "RDP gives no finite epsilon at any order for these parameters");
  }
  if (report->pld.state == accounting::SlotState::kComputed) {
    if (!std::isfinite(report->pld.value.upper)) {
      Refuse(&report->pld, "PLD gives no finite epsilon for this delta");
    } else if (report->pld.value.upper > kMaxPldEpsilon) {
      Refuse(&report->pld, kPldRangeError);
    }
  }
}

Json HandleEpsilon(const Json& request) {
  Result<double> sampling_rate = GetNumber(request, "sampling_rate");
  if (!sampling_rate.ok()) return Failure(sampling_rate.error());
  Result<double> noise_multiplier = GetNumber(request, "noise_multiplier");
  if (!noise_multiplier.ok()) return Failure(noise_multiplier.error());
  Result<int64_t> steps = GetInteger(request, "steps", 1);
  if (!steps.ok()) return Failure(steps.error());
  Result<double> delta = GetNumber(request, "delta");
  if (!delta.ok()) return Failure(delta.error());
  if (!(*delta > 0.0 && *delta < 1.0)) {
    return Failure("delta must be in (0, 1), got " + Json(*delta).dump());
  }
  // The event validates sampling_rate, noise_multiplier and steps with the core's messages.
  Result<accounting::Event> event =
      accounting::DpSgdEvent(*sampling_rate, *noise_multiplier, *steps);
  if (!event.ok()) return Failure(event.error());

  Result<std::vector<std::string>> accountants = GetAccountants(request);
  if (!accountants.ok()) return Failure(accountants.error());
  // "details": true adds the minimum-error figures that cost more than epsilon itself.
  auto details_it = request.find("details");
  const bool details = details_it != request.end() && details_it->is_boolean() &&
                       details_it->get<bool>();
  // The accounting report (accounting/report.h) of the chosen accountants: rdp converted
  // optimally as `dpkit epsilon` does by default; with "details", the minimum-error figures
  // (the RDP curve costs tens of milliseconds, skipped for the epsilon-vs-epochs grid).
  accounting::ReportOptions options;
  options.rdp = options.pld = options.gdp = false;
  for (const std::string& name : *accountants) {
    options.rdp = options.rdp || name == "rdp";
    options.pld = options.pld || name == "pld";
    options.gdp = options.gdp || name == "gdp";
  }
  const bool pld_in_range = *delta >= kMinPldDelta;
  options.pld = options.pld && pld_in_range;
  options.min_errors = details;
  accounting::PrivacyReport report =
      accounting::ComputeReport(*event, accounting::ReportQuantity::kEpsilon, *delta, options);
  if (!pld_in_range) Refuse(&report.pld, kPldDeltaError);
  ApplyCalculatorRange(&report);
  const Json report_json = accounting::ReportToJson(report);
  Json result = Json::object();
  for (const std::string& name : *accountants) result[name] = PageSlot(report_json, name.c_str());
  if (report_json.contains("headline")) result["headline"] = report_json["headline"];
  return Json{{"ok", true}, {"result", result}};
}

// The type I errors of a tradeoff request: "alphas" (a list in [0, 1]) or "points" (a
// uniform grid on [0, 1]).
Result<std::vector<double>> GetAlphas(const Json& request) {
  const std::string alphas_range = "alphas must be a list of 1 to " +
                                   std::to_string(kMaxTradeoffPoints) + " numbers in [0, 1]";
  std::vector<double> alphas;
  if (auto it = request.find("alphas"); it != request.end()) {
    if (!it->is_array() || it->empty() ||
        static_cast<int64_t>(it->size()) > kMaxTradeoffPoints) {
      return Error{alphas_range};
    }
    for (const Json& a : *it) {
      if (!a.is_number() || !(a.get<double>() >= 0.0 && a.get<double>() <= 1.0)) {
        return Error{alphas_range};
      }
      alphas.push_back(a.get<double>());
    }
    return alphas;
  }
  Result<int64_t> points = GetInteger(request, "points", 2);
  if (!points.ok()) return Error{points.error()};
  if (*points > kMaxTradeoffPoints) {
    return Error{"points must be an integer in [2, " + std::to_string(kMaxTradeoffPoints) + "]"};
  }
  for (int64_t i = 0; i < *points; ++i) {
    alphas.push_back(static_cast<double>(i) / static_cast<double>(*points - 1));
  }
  return alphas;
}

Json HandleTradeoff(const Json& request) {
  Result<double> mu = GetNumber(request, "mu");
  if (!mu.ok()) return Failure(mu.error());
  if (*mu < 0.0) return Failure("mu must be finite and >= 0, got " + Json(*mu).dump());
  Result<double> epsilon = GetNumber(request, "epsilon");
  if (!epsilon.ok()) return Failure(epsilon.error());
  if (*epsilon < 0.0) {
    return Failure("epsilon must be finite and >= 0, got " + Json(*epsilon).dump());
  }
  Result<double> delta = GetNumber(request, "delta");
  if (!delta.ok()) return Failure(delta.error());
  if (!(*delta >= 0.0 && *delta <= 1.0)) {
    return Failure("delta must be in [0, 1], got " + Json(*delta).dump());
  }
  Result<std::vector<double>> alphas = GetAlphas(request);
  if (!alphas.ok()) return Failure(alphas.error());
  Json alpha = Json::array(), gdp = Json::array(), approx_dp = Json::array();
  for (double a : *alphas) {
    alpha.push_back(a);
    gdp.push_back(accounting::GaussianTradeoff(*mu, a));
    approx_dp.push_back(accounting::ApproxDpTradeoff(*epsilon, *delta, a));
  }
  return Json{{"ok", true},
              {"result",
               {{"alpha", alpha},
                {"gdp", gdp},
                {"approx_dp", approx_dp},
                {"gdp_min_error", GdpMinimumError(*mu)},
                {"approx_dp_min_error", ApproxDpMinimumError(*epsilon, *delta)}}}};
}

// The run's own tradeoff curves (type II error at each requested type I error), both
// certified lower envelopes of the true curve (//accounting:fdp): "pld" from the
// pessimistic composed PLD and "rdp" from the RDP profile (Asoodeh et al. 2021), with
// their minimum type I + type II errors. The same curves as `dpkit tradeoff`. Heavy (the
// PLD curve): the page runs it in its Web Worker.
Json HandleRunTradeoff(const Json& request) {
  Result<double> sampling_rate = GetNumber(request, "sampling_rate");
  if (!sampling_rate.ok()) return Failure(sampling_rate.error());
  Result<double> noise_multiplier = GetNumber(request, "noise_multiplier");
  if (!noise_multiplier.ok()) return Failure(noise_multiplier.error());
  Result<int64_t> steps = GetInteger(request, "steps", 1);
  if (!steps.ok()) return Failure(steps.error());
  Result<accounting::Event> event =
      accounting::DpSgdEvent(*sampling_rate, *noise_multiplier, *steps);
  if (!event.ok()) return Failure(event.error());
  Result<std::vector<double>> alphas = GetAlphas(request);
  if (!alphas.ok()) return Failure(alphas.error());
  Result<std::vector<std::string>> accountants = GetAccountants(request);
  if (!accountants.ok()) return Failure(accountants.error());
  Json result = {{"alpha", *alphas}};
  for (const std::string& name : *accountants) {
    if (name != "pld" && name != "rdp") continue;  // gdp: the "tradeoff" op's G_mu
    if (name == "pld" && !PldInCalculatorRange(*event)) {
      result[name] = Json{{"error", kPldRangeError}};
      continue;
    }
    Result<accounting::TradeoffCurve> curve = name == "pld"
                                                  ? accounting::PldTradeoffCurve(*event)
                                                  : accounting::RdpTradeoffCurveForEvent(*event);
    if (!curve.ok()) {
      result[name] = Json{{"error", curve.error()}};
      continue;
    }
    Json beta = Json::array();
    for (double a : *alphas) beta.push_back(accounting::EvaluateTradeoff(*curve, a));
    result[name] = Json{{"beta", beta},
                        {"min_error_lower", accounting::MinimumErrorSum(*curve)}};
  }
  return Json{{"ok", true}, {"result", result}};
}

// Smallest noise multiplier whose epsilon at (delta, q, T) is at most target_epsilon, with
// the epsilon it achieves; the same JSON as `dpkit calibrate --format=json`.
Json HandleCalibrate(const Json& request) {
  Result<double> target_epsilon = GetNumber(request, "target_epsilon");
  if (!target_epsilon.ok()) return Failure(target_epsilon.error());
  Result<double> delta = GetNumber(request, "delta");
  if (!delta.ok()) return Failure(delta.error());
  Result<double> sampling_rate = GetNumber(request, "sampling_rate");
  if (!sampling_rate.ok()) return Failure(sampling_rate.error());
  Result<int64_t> steps = GetInteger(request, "steps", 1);
  if (!steps.ok()) return Failure(steps.error());
  auto it = request.find("accountant");
  if (it == request.end() || !it->is_string() || !CanCalibrate(it->get<std::string>())) {
    return Failure("accountant must be one of: " + CalibrationRange());
  }
  const std::string accountant = it->get<std::string>();
  if (accountant == "pld" && *target_epsilon > kMaxPldEpsilon) {
    return Failure(std::string("target_epsilon: ") + kPldRangeError);
  }
  if (accountant == "pld" && *delta < kMinPldDelta) {
    return Failure(std::string("delta: ") + kPldDeltaError);
  }
  // The same search as `dpkit calibrate` (//accounting:calibrate): the returned noise
  // multiplier meets the target when re-accounted and is within 0.1 % of the smallest.
  const accounting::Accountant which = accountant == "pld"   ? accounting::Accountant::kPld
                                       : accountant == "rdp" ? accounting::Accountant::kRdp
                                                             : accounting::Accountant::kGdp;
  accounting::CalibrationOptions options;
  options.rdp_conversion = accounting::CalibrationOptions::RdpConversion::kOptimal;
  Result<accounting::Calibration> calibration = accounting::CalibrateNoiseMultiplier(
      *target_epsilon, *delta, *sampling_rate, *steps, which, options);
  if (!calibration.ok()) return Failure(calibration.error());
  Json result = {{"noise_multiplier", calibration->noise_multiplier},
                 {"epsilon", calibration->epsilon},
                 {"accountant", accountant}};
  // GDP here is the CLT of Bu et al. 2020 (eq. 3.1): an approximation, not a bound.
  if (accountant == "gdp") result["approximate"] = true;
  return Json{{"ok", true}, {"result", result}};
}

Json Dispatch(const Json& request) {
  if (!request.is_object()) return Failure("request must be a JSON object");
  auto op = request.find("op");
  if (op == request.end() || !op->is_string()) return Failure("request needs a string \"op\"");
  const std::string name = op->get<std::string>();
  if (name == "epsilon") return HandleEpsilon(request);
  if (name == "tradeoff") return HandleTradeoff(request);
  if (name == "run_tradeoff") return HandleRunTradeoff(request);
  if (name == "calibrate") return HandleCalibrate(request);
  if (name == "version") {
    return Json{{"ok", true},
                {"result",
                 {{"name", "dpkit-calculator"},
                  {"accountants", AvailableAccountants()},
                  {"calibration_accountants", CalibrationAccountants()},
                  {"operations", {"epsilon", "tradeoff", "run_tradeoff", "calibrate", "version"}}}}};
  }
  return Failure("unknown op \"" + name + "\"");
}

}  // namespace

std::string HandleRequest(std::string_view request_json) {
  try {
    Json request = Json::parse(request_json, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded()) return Failure("request is not valid JSON").dump();
    // Non-finite doubles cannot appear in JSON; dump() would write them as null.
    return Dispatch(request).dump();
  } catch (const std::exception& e) {
    // The core reports errors as Result; this catches only library exceptions (e.g. an
    // allocation failure), so that the page shows a message instead of losing the module.
    return Failure(std::string("internal error: ") + e.what()).dump();
  }
}

}  // namespace dpkit::web
