// `dpkit delta`: the delta of DP-SGD (Poisson-sampled Gaussian) at a given epsilon.
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "accounting/event.h"
#include "tools/accounting_report.h"
#include "tools/cli.h"
#include "tools/command.h"
#include "tools/common_flags.h"

namespace dpkit::tools {
namespace {

absl::Status RunDelta(const CommandContext& context) {
  if (!context.args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", context.args[0], "' (all inputs are flags)"));
  }
  absl::StatusOr<bool> as_json = JsonFormatFromFlags();
  if (!as_json.ok()) return as_json.status();
  const std::string accountant = absl::GetFlag(FLAGS_accountant);
  if (auto selected = SelectAccountants(accountant); !selected.ok()) {
    return selected.status();
  }
  absl::StatusOr<DpSgdParameters> params = DpSgdParametersFromFlags();
  if (!params.ok()) return params.status();
  if (!FlagGiven("epsilon")) {
    return absl::InvalidArgumentError("--epsilon (finite, >= 0) is required");
  }
  const double epsilon = absl::GetFlag(FLAGS_epsilon);
  if (absl::Status s = CheckFiniteNonNegative("epsilon", epsilon); !s.ok()) return s;

  auto event = accounting::DpSgdEvent(params->sampling_rate, params->noise_multiplier,
                                      params->steps);
  if (!event.ok()) return absl::InvalidArgumentError(event.error());
  absl::StatusOr<nlohmann::json> report = DeltaReport(*event, epsilon, accountant);
  if (!report.ok()) return report.status();

  nlohmann::json out = *report;
  out["input"] = params->ToJson();
  out["input"]["epsilon"] = epsilon;
  const std::string text = absl::StrCat(
      "DP-SGD: sampling_rate = ", FormatNumber(params->sampling_rate),
      ", noise_multiplier = ", FormatNumber(params->noise_multiplier),
      ", steps = ", params->steps, ", epsilon = ", FormatNumber(epsilon), "\n",
      ReportToText(*report));
  PrintReport(out, text, *as_json);
  return absl::OkStatus();
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "delta", "delta of DP-SGD (Poisson-sampled Gaussian) at a given epsilon",
    "Example: dpkit delta --sampling_rate=0.01 --noise_multiplier=1 --steps=10000 "
    "--epsilon=2\nrdp is a certified upper bound; gdp (mu_CLT) is a CLT approximation.",
    {"sampling_rate", "dataset_size", "batch_size", "noise_multiplier", "steps", "epochs",
     "epsilon", "accountant", "format"},
    &RunDelta}));

}  // namespace dpkit::tools
