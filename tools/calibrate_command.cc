// `dpkit calibrate`: the smallest noise multiplier of DP-SGD (Poisson-sampled Gaussian)
// that meets a target (epsilon, delta), re-accounted by the chosen accountant.
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "accounting/calibrate.h"
#include "nlohmann/json.hpp"
#include "tools/accounting_report.h"
#include "tools/cli.h"
#include "tools/command.h"
#include "tools/common_flags.h"

namespace dpkit::tools {
namespace {

absl::Status RunCalibrate(const CommandContext& context) {
  if (!context.args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", context.args[0], "' (all inputs are flags)"));
  }
  absl::StatusOr<bool> as_json = JsonFormatFromFlags();
  if (!as_json.ok()) return as_json.status();
  // Sampling rate.
  double q = 0;
  const bool rate = FlagGiven("sampling_rate");
  const bool sizes = FlagGiven("dataset_size") || FlagGiven("batch_size");
  if (rate == sizes) {
    return absl::InvalidArgumentError(
        "give either --sampling_rate (in (0, 1]) or --dataset_size with --batch_size");
  }
  if (rate) {
    q = absl::GetFlag(FLAGS_sampling_rate);
    if (absl::Status s = CheckHalfOpenUnit("sampling_rate", q); !s.ok()) return s;
  } else {
    if (!FlagGiven("dataset_size") || !FlagGiven("batch_size")) {
      return absl::InvalidArgumentError("--dataset_size and --batch_size go together");
    }
    const int64_t n = absl::GetFlag(FLAGS_dataset_size), b = absl::GetFlag(FLAGS_batch_size);
    if (absl::Status s = CheckPositiveInt("dataset_size", n); !s.ok()) return s;
    if (absl::Status s = CheckPositiveInt("batch_size", b); !s.ok()) return s;
    if (b > n) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batch_size must be in [1, dataset_size = ", n, "], got ", b));
    }
    q = static_cast<double>(b) / static_cast<double>(n);
  }
  // Steps.
  int64_t steps = 0;
  if (FlagGiven("steps") == FlagGiven("epochs")) {
    return absl::InvalidArgumentError("give exactly one of --steps (>= 1) or --epochs (> 0)");
  }
  if (FlagGiven("steps")) {
    steps = absl::GetFlag(FLAGS_steps);
    if (absl::Status s = CheckPositiveInt("steps", steps); !s.ok()) return s;
  } else {
    absl::StatusOr<int64_t> s = StepsForEpochs(absl::GetFlag(FLAGS_epochs), 1.0, q);
    if (!s.ok()) return s.status();
    steps = *s;
  }
  if (!FlagGiven("target_epsilon")) {
    return absl::InvalidArgumentError("--target_epsilon (finite, > 0) is required");
  }
  const double target = absl::GetFlag(FLAGS_target_epsilon);
  if (absl::Status s = CheckFinitePositive("target_epsilon", target); !s.ok()) return s;
  const double delta = absl::GetFlag(FLAGS_delta);
  if (absl::Status s = CheckOpenUnit("delta", delta); !s.ok()) return s;
  const std::string name = FlagGiven("accountant") ? absl::GetFlag(FLAGS_accountant) : "pld";
  if (absl::Status s = CheckOneOf("accountant", name, {"pld", "rdp", "gdp"}); !s.ok()) return s;
  const accounting::Accountant accountant =
      name == "pld" ? accounting::Accountant::kPld
                    : (name == "rdp" ? accounting::Accountant::kRdp : accounting::Accountant::kGdp);
  auto result = accounting::CalibrateNoiseMultiplier(target, delta, q, steps, accountant);
  if (!result.ok()) return absl::OutOfRangeError(result.error());
  nlohmann::json out = {{"noise_multiplier", result->noise_multiplier},
                        {"epsilon", result->epsilon},
                        {"accountant", name},
                        {"sampling_rate", q},
                        {"steps", steps},
                        {"delta", delta}};
  if (accountant == accounting::Accountant::kGdp) out["approximate"] = true;
  const std::string text = absl::StrCat(
      "noise_multiplier = ", FormatNumber(result->noise_multiplier), "  (epsilon = ",
      FormatNumber(result->epsilon), " at delta = ", FormatNumber(delta), " by ", name,
      accountant == accounting::Accountant::kGdp ? ", CLT approximation)"
                                                 : ", certified upper bound)",
      "\n");
  PrintReport(out, text, *as_json);
  return absl::OkStatus();
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "calibrate", "smallest noise multiplier of DP-SGD for a target (epsilon, delta)",
    "Example: dpkit calibrate --dataset_size=60000 --batch_size=256 --epochs=60 "
    "--target_epsilon=2 --delta=1e-5 [--accountant=pld|rdp|gdp]\n"
    "The returned noise multiplier meets the target when re-accounted and is within "
    "0.1% of the smallest that does (pld and rdp: certified; gdp: CLT approximation).",
    {"sampling_rate", "dataset_size", "batch_size", "steps", "epochs", "target_epsilon",
     "delta", "accountant", "format"},
    &RunCalibrate}));

}  // namespace dpkit::tools
