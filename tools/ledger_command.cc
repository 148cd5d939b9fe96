// `dpkit ledger FILE`: accounts a privacy ledger written during training
// (McMahan et al. 2018, Sec. 3): epsilon at --delta, or delta at --epsilon.
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "accounting/event.h"
#include "accounting/ledger.h"
#include "accounting/report.h"
#include "base/status.h"
#include "tools/accounting_report.h"
#include "tools/cli.h"
#include "tools/command.h"
#include "tools/common_flags.h"

namespace dpkit::tools {
namespace {

absl::Status RunLedger(const CommandContext& context) {
  if (context.args.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected exactly one ledger FILE argument, got ", context.args.size()));
  }
  absl::StatusOr<bool> as_json = JsonFormatFromFlags();
  if (!as_json.ok()) return as_json.status();
  const std::string accountant = absl::GetFlag(FLAGS_accountant);
  RETURN_IF_ERROR(ReportOptionsFromFlags(accountant));
  const bool want_delta = FlagGiven("epsilon");
  if (want_delta && FlagGiven("delta")) {
    return absl::InvalidArgumentError(
        "give either --delta (report epsilon) or --epsilon (report delta), not both");
  }
  const double delta = absl::GetFlag(FLAGS_delta);
  const double epsilon = absl::GetFlag(FLAGS_epsilon);
  if (want_delta) {
    if (absl::Status s = CheckFiniteNonNegative("epsilon", epsilon); !s.ok()) return s;
  } else {
    if (absl::Status s = CheckDelta("delta", delta); !s.ok()) return s;
  }

  const std::string& path = context.args[0];
  // accounting::ReadLedger reads standard input for "-" (same line rules and ranges).
  auto entries = accounting::ReadLedger(path);
  RETURN_IF_ERROR(entries);
  auto event = accounting::LedgerToEvent(*entries);
  if (!event.ok()) {
    return base::WithContext(base::ToStatus(event), path);
  }
  ASSIGN_OR_RETURN(
      const accounting::PrivacyReport report,
      AccountingReport(*event,
                       want_delta ? accounting::ReportQuantity::kDelta
                                  : accounting::ReportQuantity::kEpsilon,
                       want_delta ? epsilon : delta, accountant));

  nlohmann::json out = accounting::ReportToJson(report);
  out["input"] = {{"ledger", path}, {"entries", entries->size()}, {"event", event->ToJson()}};
  if (want_delta) {
    out["input"]["epsilon"] = epsilon;
  } else {
    out["input"]["delta"] = delta;
  }
  const std::string text = absl::StrCat(
      "ledger ", path, ": ", entries->size(), " entries, ",
      want_delta ? "epsilon = " + FormatNumber(epsilon) : "delta = " + FormatNumber(delta),
      "\n", accounting::ReportToText(report));
  PrintReport(out, text, *as_json);
  return absl::OkStatus();
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "ledger", "account a privacy ledger (JSON lines written by training) from a file or stdin",
    "Usage: dpkit ledger FILE|- [--delta=D | --epsilon=E] [--accountant=...] "
    "[--format=text|json]\nFILE - reads the ledger from standard input. Reports epsilon at --delta (default), or delta at --epsilon.",
    {"delta", "epsilon", AccountantFlag(), ReportFormatFlag()},
    &RunLedger}));

}  // namespace dpkit::tools
