// Accountant dispatch shared by `dpkit epsilon`, `dpkit delta`, `dpkit ledger` and
// `dpkit reproduce`.
//
// An accountant is a row in a table: a name (the value of --accountant), whether
// --accountant=all includes it, and functions that turn an Event into a JSON object
// for "epsilon at delta" and "delta at epsilon". Adding an accountant (pld, prv) is
// one RegisterAccountant call from the accountant's own alwayslink library (or one
// row in BuiltinAccountants() in accounting_report.cc); the commands, the text
// output and the extra columns of `dpkit reproduce gdp-table1` pick it up.
//
// JSON conventions of an accountant's object: "epsilon" or "delta" (a number, or null
// with "infinite": true when the bound is truly infinite), the accountant's details
// (e.g. "order", "conversion", "mu"), and "approximate": true when the value is
// not a certified upper bound.
#ifndef DPKIT_TOOLS_ACCOUNTING_REPORT_H_
#define DPKIT_TOOLS_ACCOUNTING_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "accounting/event.h"
#include "nlohmann/json.hpp"

namespace dpkit::tools {

struct Accountant {
  std::string name;      // value of --accountant, key of the JSON output
  bool in_all = true;    // included in --accountant=all
  // epsilon at `delta` for `event`. Return FailedPreconditionError when this
  // accountant cannot handle the event (e.g. GDP on a Laplace event); other
  // errors are failures.
  absl::StatusOr<nlohmann::json> (*epsilon)(const accounting::Event& event,
                                            double delta) = nullptr;
  // delta at `epsilon` for `event`; same error convention.
  absl::StatusOr<nlohmann::json> (*delta)(const accounting::Event& event,
                                          double epsilon) = nullptr;
  // One line of text output for an object produced by the functions above,
  // e.g. "epsilon = 1.23 (order 14, improved conversion; certified upper bound)".
  std::string (*text)(const nlohmann::json& result) = nullptr;
};

// Adds an accountant (call from a static initialiser). Returns true.
bool RegisterAccountant(Accountant accountant);

// All accountants: built-in (rdp, gdp) first, then registered ones, in order.
const std::vector<Accountant>& Accountants();

// Valid values of --accountant: every accountant name and "all".
std::vector<std::string> AccountantChoices();

// Checks --accountant and returns the accountants it selects.
absl::StatusOr<std::vector<const Accountant*>> SelectAccountants(
    const std::string& accountant_flag);

// {"<name>": {...}, ...} for the selected accountants. With --accountant=all an
// accountant that cannot handle the event reports {"not_applicable": "<reason>"};
// when it was selected by name that is an InvalidArgumentError.
absl::StatusOr<nlohmann::json> EpsilonReport(const accounting::Event& event, double delta,
                                             const std::string& accountant_flag);
absl::StatusOr<nlohmann::json> DeltaReport(const accounting::Event& event, double epsilon,
                                           const std::string& accountant_flag);

// Text rendering of a report: one "name: line" per accountant.
std::string ReportToText(const nlohmann::json& report);

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

// --format: "text" or "json".
absl::StatusOr<bool> JsonFormatFromFlags();

// Writes the JSON or text form to stdout.
void PrintReport(const nlohmann::json& json, const std::string& text, bool as_json);

}  // namespace dpkit::tools

#endif  // DPKIT_TOOLS_ACCOUNTING_REPORT_H_
