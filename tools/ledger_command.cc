// `dpkit ledger FILE`: accounts a privacy ledger written during training
// (McMahan et al. 2018, Sec. 3): epsilon at --delta, or delta at --epsilon.
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/accounting/report.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/accounting_report.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/common_flags.h"

namespace dpkit::tools {
namespace {

absl::Status RunLedger(const CommandContext& context) {
  if (context.args.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected exactly one ledger FILE argument, got ", context.args.size()));
  }
  ASSIGN_OR_RETURN(const EventQuery query, EventQueryFromFlags());
  const std::string& path = context.args[0];
  // accounting::ReadLedger reads standard input for "-" (same line rules and ranges).
  auto entries = accounting::ReadLedger(path);
  RETURN_IF_ERROR(entries);
  auto event = accounting::LedgerToEvent(*entries);
  if (!event.ok()) return base::WithContext(base::ToStatus(event), path);
  return PrintEventReport(
      query, *event, {{"ledger", path}, {"entries", entries->size()}},
      absl::StrCat("ledger ", path, ": ", entries->size(), " entries, "));
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "ledger", "account a privacy ledger (JSON lines written by training) from a file or stdin",
    "Usage: dpkit ledger FILE|- [--delta=D | --epsilon=E] [--accountant=...] "
    "[--format=text|json]\nFILE - reads the ledger from standard input. Reports epsilon at --delta (default), or delta at --epsilon.",
    {"delta", "epsilon", AccountantFlag(), ReportFormatFlag()},
    &RunLedger}));

}  // namespace dpkit::tools
