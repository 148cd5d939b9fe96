// `dpkit epsilon` and `dpkit delta`: the privacy of DP-SGD (Poisson-sampled Gaussian)
// as epsilon at a given delta, or as delta at a given epsilon. Both run the same
// flag checks and print the same report shape; only the fixed coordinate differs.
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/report.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/accounting_report.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/common_flags.h"

namespace dpkit::tools {
namespace {

enum class Query { kEpsilonAtDelta, kDeltaAtEpsilon };

absl::Status RunQuery(const CommandContext& context, Query query) {
  if (!context.args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", Abbreviate(context.args[0]), "' (all inputs are flags)"));
  }
  absl::StatusOr<bool> as_json = JsonFormatFromFlags();
  if (!as_json.ok()) return as_json.status();
  const std::string accountant = absl::GetFlag(FLAGS_accountant);
  RETURN_IF_ERROR(ReportOptionsFromFlags(accountant));
  ASSIGN_OR_RETURN(const DpSgdParameters params, DpSgdParametersFromFlags());

  // The fixed coordinate: delta for `epsilon`, epsilon for `delta`.
  const bool at_delta = query == Query::kEpsilonAtDelta;
  const char* fixed_name = at_delta ? "delta" : "epsilon";
  double fixed = 0;
  if (at_delta) {
    fixed = absl::GetFlag(FLAGS_delta);
    if (absl::Status s = CheckDelta("delta", fixed); !s.ok()) return s;
    WarnIfDeltaNotBelowInverseDatasetSize(fixed);
  } else {
    if (!FlagGiven("epsilon")) {
      return absl::InvalidArgumentError("--epsilon (finite, >= 0) is required");
    }
    fixed = absl::GetFlag(FLAGS_epsilon);
    if (absl::Status s = CheckFiniteNonNegative("epsilon", fixed); !s.ok()) return s;
  }

  ASSIGN_OR_RETURN(const accounting::Event event,
                   accounting::DpSgdEvent(params.sampling_rate, params.noise_multiplier,
                                          params.steps));
  ASSIGN_OR_RETURN(
      const accounting::PrivacyReport report,
      AccountingReport(event,
                       at_delta ? accounting::ReportQuantity::kEpsilon
                                : accounting::ReportQuantity::kDelta,
                       fixed, accountant));

  nlohmann::json out = accounting::ReportToJson(report);
  out["input"] = params.ToJson();
  out["input"][fixed_name] = fixed;
  const std::string text = absl::StrCat(
      "DP-SGD: sampling_rate = ", FormatNumber(params.sampling_rate),
      ", noise_multiplier = ", FormatNumber(params.noise_multiplier),
      ", steps = ", params.steps, ", ", fixed_name, " = ", FormatNumber(fixed), "\n",
      accounting::ReportToText(report));
  PrintReport(out, text, *as_json);
  return absl::OkStatus();
}

absl::Status RunEpsilon(const CommandContext& context) {
  return RunQuery(context, Query::kEpsilonAtDelta);
}

absl::Status RunDelta(const CommandContext& context) {
  return RunQuery(context, Query::kDeltaAtEpsilon);
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "epsilon", "epsilon of DP-SGD (Poisson-sampled Gaussian) at a given delta",
    "Example: dpkit epsilon --dataset_size=60000 --batch_size=256 "
    "--noise_multiplier=1.1 --epochs=60 --delta=1e-5\n"
    "pld (certified interval [epsilon_lower, epsilon_upper], Koskela et al. 2020 / Doroshenko "
    "et al. 2022) and rdp are certified upper bounds; gdp (mu_CLT, Bu et al. 2020) is a CLT "
    "approximation, not an upper bound. The headline is the smallest certified bound.",
    {"sampling_rate", "dataset_size", "batch_size", "noise_multiplier", "steps", "epochs",
     "delta", AccountantFlag(), ReportFormatFlag(), "epsilon_tolerance", RdpConversionFlag()},
    &RunEpsilon}));

DPKIT_REGISTER_COMMAND((Command{
    "delta", "delta of DP-SGD (Poisson-sampled Gaussian) at a given epsilon",
    "Example: dpkit delta --sampling_rate=0.01 --noise_multiplier=1 --steps=10000 "
    "--epsilon=2\npld and rdp are certified upper bounds; gdp (mu_CLT) is a CLT approximation.",
    {"sampling_rate", "dataset_size", "batch_size", "noise_multiplier", "steps", "epochs",
     "epsilon", AccountantFlag(), ReportFormatFlag(), "epsilon_tolerance", RdpConversionFlag()},
    &RunDelta}));

}  // namespace dpkit::tools
