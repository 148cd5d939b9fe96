#include "dpkit/accounting/report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/gdp_composition.h"
#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/accounting/report_rounding.h"

namespace dpkit::accounting {
namespace {

using nlohmann::json;

// Printed precision: 7 significant digits in the report, 5 on a trainer's epoch line.
constexpr int kReportDigits = 7;
constexpr int kLineDigits = 5;

template <typename T>
AccountantSlot<T> NotApplicable(const std::string& message) {
  AccountantSlot<T> slot;
  slot.state = SlotState::kNotApplicable;
  slot.message = message;
  return slot;
}

template <typename T>
AccountantSlot<T> Failed(const std::string& message) {
  AccountantSlot<T> slot;
  slot.state = SlotState::kFailed;
  slot.message = message;
  return slot;
}

template <typename T>
AccountantSlot<T> Computed(T value) {
  AccountantSlot<T> slot;
  slot.state = SlotState::kComputed;
  slot.value = std::move(value);
  return slot;
}

// ---------------------------------------------------------------- rdp
AccountantSlot<RdpBound> RdpSlot(const Event& event, ReportQuantity quantity, double fixed,
                                 const ReportOptions& options) {
  const std::vector<double> orders = DefaultRdpOrders();
  Result<std::vector<double>> rdp = ComputeRdp(event, orders);
  // An event RDP does not cover is not applicable; a failed conversion is a failure.
  if (!rdp.ok()) return NotApplicable<RdpBound>(rdp.error());
  RdpBound bound;
  bound.conversion = options.rdp_conversion;
  const RdpConversion formula = options.rdp_conversion == RdpReportConversion::kImproved
                                    ? RdpConversion::kImproved
                                    : RdpConversion::kClassic;
  const bool optimal = options.rdp_conversion == RdpReportConversion::kOptimal;
  if (quantity == ReportQuantity::kDelta) {
    Result<RdpDelta> delta = optimal ? RdpToDeltaOptimal(orders, *rdp, fixed)
                                     : RdpToDelta(orders, *rdp, fixed, formula);
    if (!delta.ok()) return Failed<RdpBound>(delta.error());
    bound.value = delta->delta;
    bound.order = delta->order;
    return Computed(bound);
  }
  Result<RdpEpsilon> epsilon = optimal ? RdpToEpsilonOptimal(orders, *rdp, fixed)
                                       : RdpToEpsilon(orders, *rdp, fixed, formula);
  if (!epsilon.ok()) return Failed<RdpBound>(epsilon.error());
  bound.value = epsilon->epsilon;
  bound.order = epsilon->order;
  if (options.min_errors) {
    // Bu et al. 2020, Sec. 5: min over tests of type I + type II error, here
    // min_alpha alpha + T(alpha) of a certified lower envelope (Asoodeh et al. 2021).
    Result<TradeoffCurve> curve = RdpTradeoffCurve(orders, *rdp);
    if (!curve.ok()) return Failed<RdpBound>(curve.error());
    bound.min_error_lower = MinimumErrorSum(*curve);
  }
  return Computed(bound);
}

// ---------------------------------------------------------------- pld
AccountantSlot<PldBound> PldSlot(const Event& event, ReportQuantity quantity, double fixed,
                                 const ReportOptions& options) {
  PldBound bound;
  if (quantity == ReportQuantity::kDelta) {
    Result<DeltaBounds> delta = PldDelta(event, fixed, options.pld_options);
    if (!delta.ok()) return NotApplicable<PldBound>(delta.error());
    bound.upper = delta->delta_upper;
    bound.lower = delta->delta_lower;
    bound.discretization_interval = delta->discretization_interval;
    return Computed(bound);
  }
  if (fixed < options.min_pld_delta) {
    return NotApplicable<PldBound>("the pld accountant supports delta >= " +
                                   internal::FormatDouble(options.min_pld_delta));
  }
  PldOptions pld_options = options.pld_options;
  pld_options.with_delta0 = options.min_errors;
  Result<EpsilonBounds> epsilon = PldEpsilon(event, fixed, pld_options);
  if (!epsilon.ok()) return NotApplicable<PldBound>(epsilon.error());
  bound.upper = epsilon->epsilon_upper;
  bound.lower = epsilon->epsilon_lower;
  bound.discretization_interval = epsilon->discretization_interval;
  if (options.min_errors) {
    // 1 - TV = 1 - delta(0) (Dong, Roth, Su 2019, Prop. 2.12 at eps = 0; Bu et al. 2020,
    // Sec. 5): with the certified delta bounds, a certified interval. delta(0) is composed
    // on the grids epsilon was computed on (PldOptions::with_delta0).
    double tv_upper = epsilon->delta0_upper, tv_lower = epsilon->delta0_lower;
    // The refinement target of PldDelta (gap <= 10 tolerance delta): PldEpsilon composes
    // delta(0) only where epsilon's curves leave it wider, and where its grid's
    // compositions still do, takes the decomposed bound (7) of delta(0) (Table 1 row 6,
    // sigma 0.5: [0.92178, 0.92182]; q 1e-4, sigma 0.5, T 1e5, delta 0.1: [0.08715,
    // 0.08717]). Only where that is still too wide and (7) does not apply (events of
    // several components, e.g. tests/golden's ledger_pure_and_approx) is delta(0)
    // computed on its own: its own grid search and refinements. Not where PldEpsilon
    // certified no lower bound on delta(0) at all: the narrow bulk that loses it there
    // loses it on PldDelta's grids too (q 1e-6, sigma 30, T 1e7, delta 1e-15: 11 s for the
    // same [0, 1.0e-4]); nor where (7) was applied to delta(0) on epsilon's final grid
    // (EpsilonBounds::delta0_decomposed: q 1e-4, sigma 0.5, T 1e7, delta 1e-5: 25 s for the
    // same [0.73500, 0.73848]); nor where epsilon's automatic grid did not fit: a second
    // search for a fitting grid costs as much again for nothing better (q 1e-6, sigma 0.5,
    // T 1e7, delta 1e-15: 18 s of coarsening and decomposition for the trivial [0, 1];
    // issues 16 and 21). Both results are certified, the tighter sides kept; where the
    // second computation fails, epsilon's are kept.
    const double wanted = 10 * options.pld_options.epsilon_tolerance * tv_upper;
    const bool wide = !(tv_upper < 1) || (tv_lower > 0 && !epsilon->delta0_decomposed &&
                                          tv_upper - tv_lower > wanted);
    if (!epsilon->grid_coarsened && wide) {
      Result<DeltaBounds> tv = PldDelta(event, 0.0, options.pld_options);
      if (tv.ok()) {
        tv_upper = std::min(tv_upper, tv->delta_upper);
        tv_lower = std::max(tv_lower, tv->delta_lower);
      }
    }
    bound.min_error_lower = 1 - tv_upper;
    bound.min_error_upper = 1 - tv_lower;
  }
  return Computed(bound);
}

// ---------------------------------------------------------------- gdp
AccountantSlot<GdpValue> GdpSlot(const Event& event, ReportQuantity quantity, double fixed) {
  Result<GdpComposition> mu = GdpMuOfEvent(event);
  if (!mu.ok()) return NotApplicable<GdpValue>(mu.error());
  GdpValue value;
  value.mu = mu->mu;
  value.approximate = mu->approximate;
  if (quantity == ReportQuantity::kDelta) {
    Result<double> delta = GdpDelta(mu->mu, fixed);
    if (!delta.ok()) return Failed<GdpValue>(delta.error());
    if (std::isnan(*delta)) {
      return NotApplicable<GdpValue>("GDP delta is outside double precision for mu = " +
                                     internal::FormatDouble(mu->mu));
    }
    value.value = *delta;
    return Computed(value);
  }
  Result<double> epsilon = GdpEpsilon(mu->mu, fixed);
  if (!epsilon.ok()) return Failed<GdpValue>(epsilon.error());
  // mu far above any useful privacy (the noise is negligible) leaves double's range in
  // the conversion; no number is better than a NaN printed as one.
  if (std::isnan(*epsilon)) {
    return NotApplicable<GdpValue>("GDP epsilon is outside double precision for mu = " +
                                   internal::FormatDouble(mu->mu));
  }
  value.value = *epsilon;
  // min_alpha alpha + G_mu(alpha) = 2 Phi(-mu/2) = erfc(mu / (2 sqrt 2)), attained at
  // alpha = Phi(-mu/2) (Bu et al. 2020, Sec. 5). Approximate when mu is mu_CLT.
  value.min_error = std::erfc(mu->mu / (2 * std::sqrt(2.0)));
  return Computed(value);
}

// ---------------------------------------------------------------- json
json Number(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

const char* QuantityName(ReportQuantity quantity) {
  return quantity == ReportQuantity::kEpsilon ? "epsilon" : "delta";
}

template <typename T>
std::optional<json> StateJson(const AccountantSlot<T>& slot) {
  if (slot.state == SlotState::kNotApplicable) return json{{"not_applicable", slot.message}};
  if (slot.state == SlotState::kFailed) return json{{"error", slot.message}};
  return std::nullopt;
}

json RdpJson(const RdpBound& r, ReportQuantity quantity) {
  json out = {{QuantityName(quantity), Number(r.value)},
              {"order", Number(r.order)},
              {"conversion", RdpReportConversionName(r.conversion)}};
  if (quantity == ReportQuantity::kEpsilon && std::isinf(r.value)) out["infinite"] = true;
  if (r.min_error_lower) out["min_error_lower"] = Number(*r.min_error_lower);
  return out;
}

// True when the PLD accountant certified no lower bound: 0 below a positive upper bound
// (e.g. q = 1e-6, sigma = 0.5, T = 1e7, where every optimistic PMF loses its bulk).
bool NoLowerBound(const PldBound& p) { return !(p.lower > 0) && p.upper > 0; }

json PldJson(const PldBound& p, ReportQuantity quantity) {
  const std::string name = QuantityName(quantity);
  json out = {{name, Number(p.upper)},
              {name + "_upper", Number(p.upper)},
              {name + "_lower", Number(p.lower)},
              {"discretization_interval", p.discretization_interval}};
  // A lower bound of 0 below a positive upper bound certifies nothing: labelled as none
  // (issue 21, soundness 3), the number kept for readers of older reports.
  if (NoLowerBound(p)) out["no_lower_bound"] = true;
  if (quantity == ReportQuantity::kEpsilon) {
    if (std::isinf(p.upper)) {
      out["infinite"] = true;
    } else {
      out["gap"] = Number(p.upper - p.lower);
    }
  }
  if (p.min_error_lower) out["min_error_lower"] = Number(*p.min_error_lower);
  if (p.min_error_upper) out["min_error_upper"] = Number(*p.min_error_upper);
  return out;
}

json GdpJson(const GdpValue& g, ReportQuantity quantity) {
  json out = {{"mu", Number(g.mu)},
              {QuantityName(quantity), Number(g.value)},
              {"approximate", g.approximate}};
  if (g.min_error) out["min_error"] = Number(*g.min_error);
  return out;
}

// A null JSON number is a non-finite value: +inf for a bound, NaN for an order.
Result<double> ReadNumber(const json& object, const std::string& key, double if_null) {
  auto it = object.find(key);
  if (it == object.end()) return Error{"report JSON: missing \"" + key + "\""};
  if (it->is_null()) return if_null;
  if (!it->is_number()) return Error{"report JSON: \"" + key + "\" must be a number"};
  return it->get<double>();
}

std::optional<double> ReadOptional(const json& object, const std::string& key) {
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (!it->is_number()) return std::numeric_limits<double>::infinity();
  return it->get<double>();
}

// Reads the state part of a slot; true when the slot holds a computed value to read.
template <typename T>
Result<bool> ReadState(const json& report, const char* name, AccountantSlot<T>* slot) {
  auto it = report.find(name);
  if (it == report.end()) return false;
  if (!it->is_object()) return Error{std::string("report JSON: \"") + name + "\" must be an object"};
  for (const char* key : {"not_applicable", "error"}) {
    auto message = it->find(key);
    if (message == it->end()) continue;
    slot->state = std::string(key) == "error" ? SlotState::kFailed : SlotState::kNotApplicable;
    slot->message = message->is_string() ? message->get<std::string>() : message->dump();
    return false;
  }
  slot->state = SlotState::kComputed;
  return true;
}

// ---------------------------------------------------------------- text
std::string Up(double value, int digits) { return FormatUpperBound(value, digits); }
std::string Down(double value, int digits) { return FormatLowerBound(value, digits); }
std::string Near(double value, int digits) {
  return FormatRounded(value, digits, Rounding::kNearest);
}

template <typename T>
bool StateLine(const char* name, const AccountantSlot<T>& slot, std::string* text) {
  if (slot.state == SlotState::kNotApplicable) {
    *text += std::string(name) + ": not applicable: " + slot.message + "\n";
    return true;
  }
  if (slot.state == SlotState::kFailed) {
    *text += std::string(name) + ": failed: " + slot.message + "\n";
    return true;
  }
  return slot.state == SlotState::kNotRun;
}

std::string PldLine(const PldBound& p, const std::string& name) {
  if (std::isinf(p.upper)) return name + " = inf (no finite bound)";
  std::string line = name + " = " + Up(p.upper, kReportDigits) +
                     (NoLowerBound(p) ? std::string("  (certified upper bound; no lower bound certified)")
                                      : "  (certified upper bound; exact value >= " +
                                            Down(p.lower, kReportDigits) + ")");
  if (p.min_error_lower) {
    line += "; min type I + type II error >= " + Down(*p.min_error_lower, kReportDigits);
  }
  return line;
}

std::string RdpLine(const RdpBound& r, const std::string& name) {
  std::string line = name + " = " +
                     (std::isinf(r.value) ? std::string("inf (no finite bound)")
                                          : Up(r.value, kReportDigits)) +
                     "  (order " + (std::isnan(r.order) ? std::string("none") : internal::FormatDouble(r.order)) + ", " +
                     RdpReportConversionName(r.conversion) +
                     " conversion; certified upper bound)";
  if (r.min_error_lower && std::isfinite(*r.min_error_lower)) {
    line += "; min type I + type II error >= " + Down(*r.min_error_lower, kReportDigits);
  }
  return line;
}

std::string GdpLine(const GdpValue& g, const std::string& name) {
  // An approximate value is rounded to nearest (it bounds nothing); an exact mu-GDP value
  // is a certified upper bound and rounded up.
  std::string line = name + " = " +
                     (g.approximate ? Near(g.value, kReportDigits) : Up(g.value, kReportDigits)) +
                     "  (mu = " + Near(g.mu, kReportDigits) +
                     (g.approximate ? "; CLT APPROXIMATION, not an upper bound)"
                                    : "; exact for mu-GDP)");
  if (g.min_error && std::isfinite(*g.min_error)) {
    line += "; min type I + type II error " +
            (g.approximate ? "= " + Near(*g.min_error, kReportDigits) + " (approximate)"
                           : ">= " + Down(*g.min_error, kReportDigits));
  }
  return line;
}

std::string UpperName(const std::string& accountant) {
  std::string out = accountant;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* RdpReportConversionName(RdpReportConversion conversion) {
  switch (conversion) {
    case RdpReportConversion::kOptimal:
      return "optimal";
    case RdpReportConversion::kImproved:
      return "improved";
    case RdpReportConversion::kClassic:
      return "classic";
  }
  return "optimal";
}

Result<RdpReportConversion> ParseRdpReportConversion(const std::string& name) {
  for (RdpReportConversion c : {RdpReportConversion::kOptimal, RdpReportConversion::kImproved,
                                RdpReportConversion::kClassic}) {
    if (name == RdpReportConversionName(c)) return c;
  }
  return Error{"rdp_conversion must be one of optimal|improved|classic, got '" + name + "'"};
}

PrivacyReport ComputeReport(const Event& event, ReportQuantity quantity, double fixed,
                            const ReportOptions& options) {
  PrivacyReport report;
  report.quantity = quantity;
  report.fixed = fixed;
  if (options.rdp) report.rdp = RdpSlot(event, quantity, fixed, options);
  if (options.gdp) report.gdp = GdpSlot(event, quantity, fixed);
  if (options.pld) report.pld = PldSlot(event, quantity, fixed, options);
  return report;
}

Result<double> CertifiedRdpEpsilon(const Event& event, double delta) {
  if (!(delta > 0 && delta < 1)) {
    return Error{"delta must be in (0, 1), got " + internal::FormatDouble(delta)};
  }
  ReportOptions options;
  options.pld = options.gdp = options.min_errors = false;
  const AccountantSlot<RdpBound> rdp =
      RdpSlot(event, ReportQuantity::kEpsilon, delta, options);
  if (rdp.state != SlotState::kComputed) return Error{rdp.message};
  return rdp.value.value;
}

PrivacyReport EmptyRunReport(ReportQuantity quantity, double fixed) {
  PrivacyReport report;
  report.quantity = quantity;
  report.fixed = fixed;
  RdpBound zero;
  zero.order = std::numeric_limits<double>::quiet_NaN();
  report.rdp = Computed(zero);
  return report;
}

std::optional<Headline> ReportHeadline(const PrivacyReport& report) {
  std::optional<Headline> best;
  auto consider = [&best](const char* name, double value) {
    if (!best || value < best->value) best = Headline{name, value};
  };
  if (report.pld.state == SlotState::kComputed) consider("pld", report.pld.value.upper);
  if (report.rdp.state == SlotState::kComputed) consider("rdp", report.rdp.value.value);
  if (report.gdp.state == SlotState::kComputed && !report.gdp.value.approximate &&
      !std::isnan(report.gdp.value.value)) {
    consider("gdp", report.gdp.value.value);
  }
  return best;
}

json ReportToJson(const PrivacyReport& report) {
  json out = json::object();
  const ReportQuantity q = report.quantity;
  if (report.rdp.state != SlotState::kNotRun) {
    out["rdp"] = StateJson(report.rdp).value_or(RdpJson(report.rdp.value, q));
  }
  if (report.pld.state != SlotState::kNotRun) {
    out["pld"] = StateJson(report.pld).value_or(PldJson(report.pld.value, q));
  }
  if (report.gdp.state != SlotState::kNotRun) {
    out["gdp"] = StateJson(report.gdp).value_or(GdpJson(report.gdp.value, q));
  }
  if (std::optional<Headline> headline = ReportHeadline(report)) {
    json h = {{"accountant", headline->accountant},
              {QuantityName(q), Number(headline->value)},
              {"certified", true}};
    if (std::isinf(headline->value)) h["infinite"] = true;
    out["headline"] = h;
  }
  return out;
}

Result<PrivacyReport> ReportFromJson(const json& j, ReportQuantity quantity, double fixed) {
  if (!j.is_object()) return Error{"report JSON must be an object"};
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string name = QuantityName(quantity);
  PrivacyReport report;
  report.quantity = quantity;
  report.fixed = fixed;
  Result<bool> rdp = ReadState(j, "rdp", &report.rdp);
  if (!rdp.ok()) return Error{rdp.error()};
  if (*rdp) {
    const json& r = j["rdp"];
    Result<double> value = ReadNumber(r, name, inf);
    Result<double> order = ReadNumber(r, "order", nan);
    if (!value.ok() || !order.ok()) return Error{value.ok() ? order.error() : value.error()};
    Result<RdpReportConversion> conversion = ParseRdpReportConversion(
        r.value("conversion", std::string(RdpReportConversionName(RdpReportConversion::kOptimal))));
    if (!conversion.ok()) return Error{conversion.error()};
    report.rdp.value = RdpBound{*value, *order, *conversion, ReadOptional(r, "min_error_lower")};
  }
  Result<bool> pld = ReadState(j, "pld", &report.pld);
  if (!pld.ok()) return Error{pld.error()};
  if (*pld) {
    const json& p = j["pld"];
    Result<double> upper = ReadNumber(p, name + "_upper", inf);
    Result<double> lower = ReadNumber(p, name + "_lower", inf);
    if (!upper.ok() || !lower.ok()) return Error{upper.ok() ? lower.error() : upper.error()};
    report.pld.value = PldBound{*upper, *lower, p.value("discretization_interval", 0.0),
                                ReadOptional(p, "min_error_lower"),
                                ReadOptional(p, "min_error_upper")};
  }
  Result<bool> gdp = ReadState(j, "gdp", &report.gdp);
  if (!gdp.ok()) return Error{gdp.error()};
  if (*gdp) {
    const json& g = j["gdp"];
    Result<double> mu = ReadNumber(g, "mu", inf);
    Result<double> value = ReadNumber(g, name, inf);
    if (!mu.ok() || !value.ok()) return Error{mu.ok() ? value.error() : mu.error()};
    report.gdp.value = GdpValue{*mu, *value, g.value("approximate", true),
                                ReadOptional(g, "min_error")};
  }
  return report;
}

std::string ReportToText(const PrivacyReport& report) {
  const std::string name = QuantityName(report.quantity);
  std::string text = "headline: ";
  if (std::optional<Headline> headline = ReportHeadline(report)) {
    text += std::isinf(headline->value)
                ? name + " = inf (no accountant certified a finite bound)\n"
                : name + " <= " + Up(headline->value, kReportDigits) +
                      "  (smallest certified upper bound: " + headline->accountant + ")\n";
  } else {
    text += "no accountant certified a bound\n";
  }
  if (!StateLine("pld", report.pld, &text)) {
    text += "pld: " + PldLine(report.pld.value, name) + "\n";
  }
  if (!StateLine("rdp", report.rdp, &text)) {
    text += "rdp: " + RdpLine(report.rdp.value, name) + "\n";
  }
  if (!StateLine("gdp", report.gdp, &text)) {
    text += "gdp: " + GdpLine(report.gdp.value, name) + "\n";
  }
  return text;
}

std::string ReportToLine(const PrivacyReport& report) {
  const std::string name = report.quantity == ReportQuantity::kEpsilon ? "eps" : "delta";
  char fixed[32];
  std::snprintf(fixed, sizeof(fixed), "%g", report.fixed);
  const std::string fixed_text =
      std::string(report.quantity == ReportQuantity::kEpsilon ? "delta=" : "eps=") + fixed;
  std::string line;
  std::optional<Headline> headline = ReportHeadline(report);
  if (!headline) {
    line = name + ": no certified bound (" + fixed_text + ")";
  } else {
    line = name + " <= " + Up(headline->value, kLineDigits) + " (" +
           UpperName(headline->accountant) + ", " + fixed_text;
    // The other certified bounds, for comparison.
    if (headline->accountant != "pld" && report.pld.state == SlotState::kComputed) {
      line += "; PLD " + Up(report.pld.value.upper, kLineDigits);
    }
    if (headline->accountant != "rdp" && report.rdp.state == SlotState::kComputed) {
      line += "; RDP " + Up(report.rdp.value.value, kLineDigits);
    }
    line += ")";
  }
  if (report.gdp.state == SlotState::kComputed && report.gdp.value.approximate) {
    line += "; mu_CLT " + Near(report.gdp.value.mu, 3) + " -> " + name + " ~ " +
            Near(report.gdp.value.value, 4) + " (approximate, not a bound)";
  }
  return line;
}

}  // namespace dpkit::accounting
