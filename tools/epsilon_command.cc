// `dpkit epsilon`: the privacy of DP-SGD (Poisson-sampled Gaussian) at a given delta.
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

absl::Status RunEpsilon(const CommandContext& context) {
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
  const double delta = absl::GetFlag(FLAGS_delta);
  if (absl::Status s = CheckOpenUnit("delta", delta); !s.ok()) return s;

  auto event = accounting::DpSgdEvent(params->sampling_rate, params->noise_multiplier,
                                      params->steps);
  if (!event.ok()) return absl::InvalidArgumentError(event.error());
  absl::StatusOr<nlohmann::json> report = EpsilonReport(*event, delta, accountant);
  if (!report.ok()) return report.status();

  nlohmann::json out = *report;
  out["input"] = params->ToJson();
  out["input"]["delta"] = delta;
  const std::string text = absl::StrCat(
      "DP-SGD: sampling_rate = ", FormatNumber(params->sampling_rate),
      ", noise_multiplier = ", FormatNumber(params->noise_multiplier),
      ", steps = ", params->steps, ", delta = ", FormatNumber(delta), "\n",
      ReportToText(*report));
  PrintReport(out, text, *as_json);
  return absl::OkStatus();
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "epsilon", "epsilon of DP-SGD (Poisson-sampled Gaussian) at a given delta",
    "Example: dpkit epsilon --dataset_size=60000 --batch_size=256 "
    "--noise_multiplier=1.1 --epochs=60 --delta=1e-5\n"
    "rdp is a certified upper bound; gdp (mu_CLT, Bu et al. 2020) is a CLT "
    "approximation, not an upper bound.",
    {"sampling_rate", "dataset_size", "batch_size", "noise_multiplier", "steps", "epochs",
     "delta", "accountant", "format", "epsilon_tolerance"},
    &RunEpsilon}));

}  // namespace dpkit::tools
