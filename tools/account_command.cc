// `dpkit account FILE|-`: the privacy of any event tree, read from FILE or standard input
// in dpkit's event JSON (accounting/event.h) or dp_accounting's spelling
// (accounting/event_json_dp_accounting.h): epsilon at --delta, or delta at --epsilon, by
// every accountant that applies (--accountant=all), through the accounting report.
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/event_json_dp_accounting.h"
#include "dpkit/accounting/report.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/accounting_report.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/common_flags.h"

namespace dpkit::tools {
namespace {

absl::Status RunAccount(const CommandContext& context) {
  if (context.args.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected exactly one event FILE argument (or - for standard input), got ",
        context.args.size()));
  }
  ASSIGN_OR_RETURN(const EventQuery query, EventQueryFromFlags());
  const std::string& path = context.args[0];
  ASSIGN_OR_RETURN(const std::string text, ReadInputText(path, "event"));
  auto event = accounting::EventFromAnyJsonString(text);
  if (!event.ok()) {
    return base::WithContext(base::ToStatus(event), path == "-" ? "standard input" : path);
  }
  return PrintEventReport(query, *event, {{"file", path}},
                          absl::StrCat("event ", Abbreviate(event->ToJsonString()), "\n"));
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "account", "privacy of any event tree (dpkit or dp_accounting JSON) from a file or stdin",
    "Usage: dpkit account FILE|- [--delta=D | --epsilon=E] [--accountant=...] "
    "[--format=text|json]\n"
    "FILE (- for standard input) holds one event tree, in dpkit's JSON\n"
    "  {\"type\":\"self_composed\",\"count\":1000,\"event\":{\"type\":\"laplace\",\"scale\":10}}\n"
    "or dp_accounting's spelling\n"
    "  {\"SelfComposedDpEvent\":{\"count\":1000,\"event\":{\"LaplaceDpEvent\":"
    "{\"noise_multiplier\":10}}}}\n"
    "(examples in tools/README.md). Reports epsilon at --delta (default), or delta at "
    "--epsilon.",
    {"delta", "epsilon", AccountantFlag(), ReportFormatFlag(), "epsilon_tolerance", RdpConversionFlag()},
    &RunAccount}));

}  // namespace dpkit::tools
