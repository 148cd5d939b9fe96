// The accounting commands' side of the accounting report (accounting/report.h):
// `dpkit epsilon`, `dpkit delta`, `dpkit ledger` and `dpkit reproduce` choose the
// accountants with --accountant (rdp, gdp, pld or all), set them up from --rdp_conversion
// and --epsilon_tolerance, and print the report with its one JSON or text formatter.
//
// Error policy: with --accountant=all an accountant that cannot handle the event is
// reported as {"not_applicable": "<reason>"}; selected by name, that is an input error
// (exit 2). An accountant whose computation fails fails the command.
#ifndef DPKIT_TOOLS_ACCOUNTING_REPORT_H_
#define DPKIT_TOOLS_ACCOUNTING_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/report.h"
#include "nlohmann/json.hpp"
#include "dpkit/tools/command.h"

ABSL_DECLARE_FLAG(double, epsilon_tolerance);

namespace dpkit::tools {

// Valid values of --accountant, in report order of computation: rdp, gdp, pld, all.
std::vector<std::string> AccountantChoices();

// The flags of the accounting reports with their defaults and choices, as the parser
// applies them and --help prints them (tools/command.h): --accountant (default all),
// --format (text|json, default text), --rdp_conversion (default optimal).
FlagSpec AccountantFlag();
FlagSpec ReportFormatFlag();
FlagSpec RdpConversionFlag();

// Checks --accountant (one line naming the choices on error).
absl::Status CheckAccountant(const std::string& accountant_flag);

// The report options of the flags: the accountants --accountant selects, --rdp_conversion
// and --epsilon_tolerance (in [1e-7, 0.1]).
absl::StatusOr<accounting::ReportOptions> ReportOptionsFromFlags(
    const std::string& accountant_flag);

// The report of `event` (epsilon at `fixed` = delta, or delta at `fixed` = epsilon) by the
// accountants of `accountant_flag`, with the error policy of the file comment.
absl::StatusOr<accounting::PrivacyReport> AccountingReport(const accounting::Event& event,
                                                           accounting::ReportQuantity quantity,
                                                           double fixed,
                                                           const std::string& accountant_flag);

// What `dpkit ledger` and `dpkit account` ask of an event read from a file: epsilon at
// --delta, or delta at --epsilon (not both), by --accountant, printed as --format says.
struct EventQuery {
  bool as_json = false;
  std::string accountant;
  bool want_delta = false;  // --epsilon given: report delta
  double delta = 0;
  double epsilon = 0;
};
absl::StatusOr<EventQuery> EventQueryFromFlags();

// Computes and prints the report of `event` for `query`. `input` (the caller's fields, e.g.
// the file) gains "event" and the fixed "delta" or "epsilon"; `heading` starts the text.
absl::Status PrintEventReport(const EventQuery& query, const accounting::Event& event,
                              nlohmann::json input, const std::string& heading);

// A JSON number, or null for a non-finite value (callers add "infinite": true).
// Never NaN: NaN is an internal error and reported as such by the callers.
nlohmann::json JsonNumber(double value);

// DP-SGD parameters from the common flags (--sampling_rate or --dataset_size and
// --batch_size; --noise_multiplier; --steps or --epochs), validated with one-line
// errors naming the flag. steps = ceil(epochs / q) (ceil(epochs * n / b) when the
// dataset and batch sizes are given).
struct DpSgdParameters {
  double sampling_rate;
  double noise_multiplier;
  int64_t steps;
  nlohmann::json ToJson() const;
};
absl::StatusOr<DpSgdParameters> DpSgdParametersFromFlags();

// Steps of `epochs` passes at sampling rate q = batch_size / dataset_size:
// ceil(epochs * dataset_size / batch_size). Errors name --epochs.
absl::StatusOr<int64_t> StepsForEpochs(double epochs, double dataset_size,
                                       double batch_size);

// Warns on stderr, in one line, when --dataset_size = n was given and delta >= 1/n: a
// mechanism that publishes one random record in full is then (0, delta)-DP, so such a
// delta protects nobody (Dwork & Roth 2014, Sec. 2.3). Returns true if it warned.
bool WarnIfDeltaNotBelowInverseDatasetSize(double delta);

// --format: "text" or "json".
absl::StatusOr<bool> JsonFormatFromFlags();

// Writes the JSON or text form to stdout.
void PrintReport(const nlohmann::json& json, const std::string& text, bool as_json);

}  // namespace dpkit::tools

#endif  // DPKIT_TOOLS_ACCOUNTING_REPORT_H_
