// The accounting report: every accountant's answer for one event, as one plain value with
// one JSON and one text formatter. It serves the command line (`dpkit epsilon`, `delta`,
// `ledger`, `reproduce`), the trainer's per-epoch line and metrics, and the browser
// calculator, so that the three print the same numbers with the same labels.
//
// Accountants (each optional, chosen by ReportOptions):
//   rdp  certified upper bound from Rényi DP at the default orders (//accounting:rdp),
//        converted optimally (Asoodeh et al. 2021, //accounting:conversions) or by the
//        improved (Balle et al. 2020, Thm. 21) or classic (Mironov 2017, Prop. 3)
//        formula; with min_errors, a certified lower bound on the smallest type I + type II
//        error from the RDP-implied tradeoff curve (//accounting:fdp).
//   pld  certified upper AND lower bounds (//accounting:pld); with min_errors, the smallest
//        type I + type II error 1 - TV = 1 - delta(0) as a certified interval (Dong, Roth,
//        Su 2019, Prop. 2.12 at eps = 0; Bu et al. 2020, Sec. 5).
//   gdp  mu of the event tree (accounting/gdp_composition.h) converted by Bu et al. 2020,
//        eq. (3.2); an APPROXIMATION whenever the CLT of eq. (3.1) entered mu (labelled so),
//        exact for mu-GDP otherwise; min_error = 2 Phi(-mu/2) (Bu et al. 2020, Sec. 5).
// The headline is the smallest certified upper bound of all accountants run, named
// (issue 21, item 3): an approximate GDP value never heads a report.
//
// Every value here is a double exactly as computed; the formatters round printed bounds
// outward (accounting/report_rounding.h), the JSON keeps them exact.
#ifndef DPKIT_ACCOUNTING_REPORT_H_
#define DPKIT_ACCOUNTING_REPORT_H_

#include <optional>
#include <string>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/result.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting {

// What the report bounds; the other coordinate is fixed (PrivacyReport::fixed).
enum class ReportQuantity {
  kEpsilon,  // epsilon at a fixed delta
  kDelta,    // delta at a fixed epsilon
};

enum class RdpReportConversion { kOptimal, kImproved, kClassic };

// "optimal" / "improved" / "classic"; and the inverse (error for any other text).
const char* RdpReportConversionName(RdpReportConversion conversion);
Result<RdpReportConversion> ParseRdpReportConversion(const std::string& name);

struct ReportOptions {
  bool rdp = true;  // which accountants run
  bool pld = true;
  bool gdp = true;
  RdpReportConversion rdp_conversion = RdpReportConversion::kOptimal;
  PldOptions pld_options;
  // The minimum type I + type II error figures (a tradeoff curve for rdp, a second PLD
  // for pld: they cost more than the bound itself).
  bool min_errors = true;
  // The PLD accountant's smallest delta (an epsilon report below it: not applicable).
  double min_pld_delta = 1e-100;
};

// The outcome of one accountant.
enum class SlotState {
  kNotRun,         // not selected
  kComputed,       // the value is valid
  kNotApplicable,  // the accountant cannot handle this event or input (message says why)
  kFailed,         // it should have, but a computation failed (message says which)
};

struct RdpBound {
  double value = 0;       // epsilon or delta: certified upper bound (+inf allowed)
  double order = 0;       // the order attaining it (NaN when there is none, e.g. empty run)
  RdpReportConversion conversion = RdpReportConversion::kOptimal;
  std::optional<double> min_error_lower;  // epsilon reports with min_errors only
};

struct PldBound {
  double upper = 0;  // certified upper bound (+inf allowed)
  double lower = 0;  // certified lower bound
  double discretization_interval = 0;
  std::optional<double> min_error_lower;  // epsilon reports with min_errors only
  std::optional<double> min_error_upper;
};

struct GdpValue {
  double mu = 0;
  double value = 0;          // epsilon or delta of mu-GDP
  bool approximate = false;  // a CLT term entered mu: not an upper bound
  std::optional<double> min_error;  // epsilon reports only
};

template <typename T>
struct AccountantSlot {
  SlotState state = SlotState::kNotRun;
  T value{};            // meaningful when state == kComputed
  std::string message;  // why, when kNotApplicable or kFailed
};

struct PrivacyReport {
  ReportQuantity quantity = ReportQuantity::kEpsilon;
  double fixed = 0;  // delta of an epsilon report, epsilon of a delta report
  AccountantSlot<RdpBound> rdp;
  AccountantSlot<PldBound> pld;
  AccountantSlot<GdpValue> gdp;
};

// Runs the accountants `options` selects on `event`. Never fails as a whole: each
// accountant's failure is recorded in its slot. `fixed` is delta in (0, 1) for an epsilon
// report, epsilon finite >= 0 for a delta report (the callers validate it).
PrivacyReport ComputeReport(const Event& event, ReportQuantity quantity, double fixed,
                            const ReportOptions& options);

// The certified RDP epsilon of `event` at `delta` (default orders, optimal conversion):
// the rdp slot of ComputeReport alone, for callers that need one number (e.g. a trainer's
// summary of the sparse DP-SGD event of optim/sparse/sparse_privacy.h).
Result<double> CertifiedRdpEpsilon(const Event& event, double delta);

// The report of an empty run (no event): epsilon 0 (delta 0) by rdp, order unknown.
PrivacyReport EmptyRunReport(ReportQuantity quantity, double fixed);

// The smallest certified upper bound of the computed accountants and its accountant
// ("pld", "rdp", or "gdp" when mu-GDP is exact); ties go to pld, then rdp. nullopt when
// no accountant computed a certified bound.
struct Headline {
  std::string accountant;
  double value;  // +inf when every certified bound is infinite
};
std::optional<Headline> ReportHeadline(const PrivacyReport& report);

// The JSON form, as `dpkit epsilon --format=json` prints it (without its "input"):
//   {"rdp": {"epsilon"|"delta", "order", "conversion", ["infinite"], ["min_error_lower"]},
//    "pld": {"epsilon", "epsilon_upper", "epsilon_lower", "discretization_interval",
//            "gap" | "infinite", ["min_error_lower", "min_error_upper"]}
//           or {"delta", "delta_upper", "delta_lower", "discretization_interval"},
//    "gdp": {"mu", "epsilon"|"delta", "approximate", ["min_error"]},
//    "headline": {"accountant", "epsilon"|"delta", "certified": true, ["infinite"]}}
// A non-finite number is null (with "infinite": true where it is a bound); an accountant
// that is not applicable is {"not_applicable": "<why>"}, one that failed {"error": "<why>"};
// one that did not run is absent.
nlohmann::json ReportToJson(const PrivacyReport& report);
// The inverse of ReportToJson (for readers of a stored report, e.g. metrics.jsonl).
Result<PrivacyReport> ReportFromJson(const nlohmann::json& json, ReportQuantity quantity,
                                     double fixed);

// Text: the headline first, then one "name: ..." line per accountant that ran (pld, rdp,
// then gdp last, labelled approximate where it is), each ending in '\n'. Bounds are
// printed with 7 significant digits rounded outward.
std::string ReportToText(const PrivacyReport& report);

// One line for a trainer's epoch report: "eps <= 1.23457 (PLD, delta=1e-05; RDP 1.3)" with
// "; mu_CLT 0.23 -> eps ~ 0.83 (approximate, not a bound)" when GDP ran. Upper bounds
// rounded up at 5 significant digits.
std::string ReportToLine(const PrivacyReport& report);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_REPORT_H_
