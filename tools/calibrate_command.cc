// `dpkit calibrate`: one unknown of DP-SGD (Poisson-sampled Gaussian) for a target
// (epsilon, delta), re-accounted by the chosen accountant (//accounting:calibrate):
//   --solve_for=noise_multiplier  the smallest sigma (within 0.1 %) given q and T;
//   --solve_for=steps             the largest T given q and sigma (T + 1 misses the target);
//   --solve_for=sampling_rate     the largest q (within 0.1 %) given sigma and T (or epochs,
//                                 then T = ceil(epochs / q) at each candidate q).
// The JSON is {"noise_multiplier", "epsilon", "accountant", ...} plus the solved field.
#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/calibrate.h"
#include "nlohmann/json.hpp"
#include "dpkit/base/status.h"
#include "dpkit/tools/accounting_report.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/common_flags.h"

ABSL_FLAG(std::string, solve_for, "noise_multiplier",
          "calibrate: the unknown to solve for");
// Defined with the rdp accountant (tools/accounting_report.cc): calibrate converts RDP
// to epsilon exactly as `dpkit epsilon --accountant=rdp` does.
ABSL_DECLARE_FLAG(std::string, rdp_conversion);
// Defined with the accounting report flags (tools/accounting_report.cc), same meaning and range.
ABSL_DECLARE_FLAG(double, epsilon_tolerance);

namespace dpkit::tools {
namespace {

// calibrate's --accountant: one accountant (there is no "all" to calibrate by), pld first.
FlagSpec CalibrateAccountantFlag() { return FlagSpec("accountant", "pld", {"pld", "rdp", "gdp"}); }
FlagSpec SolveForFlag() {
  return FlagSpec("solve_for", "noise_multiplier", {"noise_multiplier", "steps", "sampling_rate"});
}

// Largest step count --solve_for=steps searches (the answer is reported as at the
// limit when even this many steps meet the target).
constexpr int64_t kMaxCalibratedSteps = 1000000000;

struct SamplingRate {
  double q;
  double dataset_size = 0, batch_size = 0;  // > 0 when given as sizes
};

absl::StatusOr<SamplingRate> SamplingRateFromFlags() {
  const bool rate = FlagGiven("sampling_rate");
  const bool sizes = FlagGiven("dataset_size") || FlagGiven("batch_size");
  if (rate == sizes) {
    return absl::InvalidArgumentError(
        "give either --sampling_rate (in (0, 1]) or --dataset_size with --batch_size");
  }
  if (rate) {
    const double q = absl::GetFlag(FLAGS_sampling_rate);
    if (absl::Status s = CheckHalfOpenUnit("sampling_rate", q); !s.ok()) return s;
    return SamplingRate{q};
  }
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
  return SamplingRate{static_cast<double>(b) / static_cast<double>(n),
                      static_cast<double>(n), static_cast<double>(b)};
}

absl::StatusOr<double> NoiseFromFlags() {
  if (!FlagGiven("noise_multiplier")) {
    return absl::InvalidArgumentError("--noise_multiplier (finite, > 0) is required");
  }
  const double sigma = absl::GetFlag(FLAGS_noise_multiplier);
  if (absl::Status s = CheckFinitePositive("noise_multiplier", sigma); !s.ok()) return s;
  return sigma;
}

// A flag that fixes the unknown of --solve_for is an error.
absl::Status Forbid(const char* flag, const std::string& solve_for) {
  if (!FlagGiven(flag)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, solve_for == flag ? " is" : " sets", " the unknown of --solve_for=",
      solve_for, "; do not give it"));
}

std::string Kind(accounting::Accountant accountant) {
  return accountant == accounting::Accountant::kGdp ? "CLT approximation"
                                                    : "certified upper bound";
}

// The target and the accountant shared by the three unknowns, from the flags (checked in
// this order, so the first bad flag is the one named).
struct CalibrationTarget {
  double target = 0;  // --target_epsilon
  double delta = 0;
  std::string name;   // --accountant
  accounting::Accountant accountant = accounting::Accountant::kPld;
  std::string conversion;  // --rdp_conversion
  accounting::CalibrationOptions options;
};

absl::StatusOr<CalibrationTarget> CalibrationTargetFromFlags() {
  CalibrationTarget t;
  if (!FlagGiven("target_epsilon")) {
    return absl::InvalidArgumentError("--target_epsilon (finite, > 0) is required");
  }
  t.target = absl::GetFlag(FLAGS_target_epsilon);
  if (absl::Status s = CheckFinitePositive("target_epsilon", t.target); !s.ok()) return s;
  t.delta = absl::GetFlag(FLAGS_delta);
  if (absl::Status s = CheckDelta("delta", t.delta); !s.ok()) return s;
  WarnIfDeltaNotBelowInverseDatasetSize(t.delta);
  t.name = absl::GetFlag(FLAGS_accountant);
  if (absl::Status s = CheckOneOf("accountant", t.name, CalibrateAccountantFlag().choices); !s.ok()) {
    return s;
  }
  t.accountant = t.name == "pld"   ? accounting::Accountant::kPld
                 : t.name == "rdp" ? accounting::Accountant::kRdp
                                   : accounting::Accountant::kGdp;
  t.conversion = absl::GetFlag(FLAGS_rdp_conversion);
  if (absl::Status s = CheckOneOf("rdp_conversion", t.conversion, RdpConversionFlag().choices);
      !s.ok()) {
    return s;
  }
  t.options.pld.epsilon_tolerance = absl::GetFlag(FLAGS_epsilon_tolerance);
  if (!(t.options.pld.epsilon_tolerance >= 1e-7 && t.options.pld.epsilon_tolerance <= 0.1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--epsilon_tolerance must be in [1e-7, 0.1], got ",
                     FormatNumber(t.options.pld.epsilon_tolerance)));
  }
  using Conversion = accounting::CalibrationOptions::RdpConversion;
  t.options.rdp_conversion = t.conversion == "optimal"    ? Conversion::kOptimal
                           : t.conversion == "improved" ? Conversion::kImproved
                                                      : Conversion::kClassic;
  return t;
}

// --solve_for=sampling_rate: the largest q for --noise_multiplier and --steps | --epochs.
absl::Status SolveSamplingRate(const CalibrationTarget& t, const std::string& solve_for,
                               nlohmann::json* out, std::string* text) {
  const double target = t.target, delta = t.delta;
  const std::string& name = t.name;
  const accounting::Accountant accountant = t.accountant;
  const accounting::CalibrationOptions& options = t.options;
  for (const char* flag : {"sampling_rate", "dataset_size", "batch_size"}) {
    if (absl::Status s = Forbid(flag, solve_for); !s.ok()) return s;
  }
  absl::StatusOr<double> sigma = NoiseFromFlags();
  if (!sigma.ok()) return sigma.status();
  if (FlagGiven("steps") == FlagGiven("epochs")) {
    return absl::InvalidArgumentError(
        "give exactly one of --steps (>= 1) or --epochs (> 0)");
  }
  accounting::Result<accounting::SamplingRateCalibration> result =
      accounting::Error{"unreached"};
  if (FlagGiven("steps")) {
    const int64_t steps = absl::GetFlag(FLAGS_steps);
    if (absl::Status s = CheckPositiveInt("steps", steps); !s.ok()) return s;
    result = accounting::LargestSamplingRate(target, delta, *sigma, steps, accountant,
                                             options);
  } else {
    const double epochs = absl::GetFlag(FLAGS_epochs);
    if (absl::Status s = CheckFinitePositive("epochs", epochs); !s.ok()) return s;
    result = accounting::LargestSamplingRateForEpochs(target, delta, *sigma, epochs,
                                                      accountant, options);
  }
  RETURN_IF_ERROR(result);
  *out = {{"noise_multiplier", *sigma},          {"epsilon", result->epsilon},
         {"accountant", name},                  {"solve_for", solve_for},
         {"sampling_rate", result->sampling_rate}, {"steps", result->steps},
         {"delta", delta}};
  if (FlagGiven("epochs")) (*out)["epochs"] = absl::GetFlag(FLAGS_epochs);
  *text = absl::StrCat("sampling_rate = ", FormatNumber(result->sampling_rate),
                      result->sampling_rate == 1.0 ? " (the largest possible)" : "",
                      "  (", result->steps, " steps, noise_multiplier ",
                      FormatNumber(*sigma), "; epsilon = ", FormatNumber(result->epsilon),
                      " at delta = ", FormatNumber(delta), " by ", name, ", ",
                      Kind(accountant), ")\n");
  return absl::OkStatus();
}

// --solve_for=steps (the largest T for --noise_multiplier) or noise_multiplier (the
// smallest sigma for --steps | --epochs), at the sampling rate of the flags.
absl::Status SolveStepsOrNoise(const CalibrationTarget& t, const std::string& solve_for,
                               nlohmann::json* out, std::string* text) {
  const double target = t.target, delta = t.delta;
  const std::string& name = t.name;
  const accounting::Accountant accountant = t.accountant;
  const accounting::CalibrationOptions& options = t.options;
  absl::StatusOr<SamplingRate> rate = SamplingRateFromFlags();
  if (!rate.ok()) return rate.status();
  const double q = rate->q;
  // epochs per step: b / n when the sizes are given, else q.
  const double epochs_per_step =
      rate->dataset_size > 0 ? rate->batch_size / rate->dataset_size : q;
  if (solve_for == "steps") {
    for (const char* flag : {"steps", "epochs"}) {
      if (absl::Status s = Forbid(flag, solve_for); !s.ok()) return s;
    }
    absl::StatusOr<double> sigma = NoiseFromFlags();
    if (!sigma.ok()) return sigma.status();
    auto result = accounting::LargestSteps(target, delta, q, *sigma, kMaxCalibratedSteps,
                                           accountant, options);
    RETURN_IF_ERROR(result);
    if (result->steps == 0) {
      return absl::OutOfRangeError(absl::StrCat(
          "even one step (sampling_rate ", FormatNumber(q), ", noise_multiplier ",
          FormatNumber(*sigma), ") exceeds target_epsilon ", FormatNumber(target),
          " at delta ", FormatNumber(delta), " by ", name));
    }
    const bool at_limit = result->steps == kMaxCalibratedSteps;
    *out = {{"noise_multiplier", *sigma},
           {"epsilon", result->epsilon},
           {"accountant", name},
           {"solve_for", solve_for},
           {"steps", result->steps},
           {"epochs", static_cast<double>(result->steps) * epochs_per_step},
           {"sampling_rate", q},
           {"delta", delta}};
    if (at_limit) (*out)["at_search_limit"] = true;
    *text = absl::StrCat(
        "steps = ", result->steps, at_limit ? " (the search limit; more may fit)" : "",
        "  (epochs = ", FormatNumber(static_cast<double>(result->steps) * epochs_per_step),
        "; epsilon = ", FormatNumber(result->epsilon), " at delta = ",
        FormatNumber(delta), " by ", name, ", ", Kind(accountant), ")\n");
  } else {
    if (absl::Status s = Forbid("noise_multiplier", solve_for); !s.ok()) return s;
    int64_t steps = 0;
    if (FlagGiven("steps") == FlagGiven("epochs")) {
      return absl::InvalidArgumentError(
          "give exactly one of --steps (>= 1) or --epochs (> 0)");
    }
    if (FlagGiven("steps")) {
      steps = absl::GetFlag(FLAGS_steps);
      if (absl::Status s = CheckPositiveInt("steps", steps); !s.ok()) return s;
    } else {
      absl::StatusOr<int64_t> s =
          rate->dataset_size > 0
              ? StepsForEpochs(absl::GetFlag(FLAGS_epochs), rate->dataset_size,
                               rate->batch_size)
              : StepsForEpochs(absl::GetFlag(FLAGS_epochs), 1.0, q);
      if (!s.ok()) return s.status();
      steps = *s;
    }
    auto result =
        accounting::CalibrateNoiseMultiplier(target, delta, q, steps, accountant, options);
    RETURN_IF_ERROR(result);
    *out = {{"noise_multiplier", result->noise_multiplier},
           {"epsilon", result->epsilon},
           {"accountant", name},
           {"solve_for", solve_for},
           {"sampling_rate", q},
           {"steps", steps},
           {"delta", delta}};
    *text = absl::StrCat("noise_multiplier = ", FormatNumber(result->noise_multiplier),
                        "  (epsilon = ", FormatNumber(result->epsilon), " at delta = ",
                        FormatNumber(delta), " by ", name, ", ", Kind(accountant), ")\n");
  }
  return absl::OkStatus();
}

absl::Status RunCalibrate(const CommandContext& context) {
  if (!context.args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", Abbreviate(context.args[0]), "' (all inputs are flags)"));
  }
  absl::StatusOr<bool> as_json = JsonFormatFromFlags();
  if (!as_json.ok()) return as_json.status();
  const std::string solve_for = absl::GetFlag(FLAGS_solve_for);
  if (absl::Status s = CheckOneOf("solve_for", solve_for, SolveForFlag().choices); !s.ok()) return s;
  ASSIGN_OR_RETURN(const CalibrationTarget target, CalibrationTargetFromFlags());
  nlohmann::json out;
  std::string text;
  RETURN_IF_ERROR(solve_for == "sampling_rate"
                      ? SolveSamplingRate(target, solve_for, &out, &text)
                      : SolveStepsOrNoise(target, solve_for, &out, &text));
  if (target.accountant == accounting::Accountant::kGdp) out["approximate"] = true;
  if (target.accountant == accounting::Accountant::kRdp) out["conversion"] = target.conversion;
  PrintReport(out, text, *as_json);
  return absl::OkStatus();
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "calibrate", "one DP-SGD parameter (noise, steps or sampling rate) for a target (epsilon, delta)",
    "Examples:\n"
    "  dpkit calibrate --dataset_size=60000 --batch_size=256 --epochs=60 "
    "--target_epsilon=2 --delta=1e-5\n"
    "  dpkit calibrate --solve_for=steps --sampling_rate=0.01 --noise_multiplier=1 "
    "--target_epsilon=2\n"
    "  dpkit calibrate --solve_for=sampling_rate --noise_multiplier=1 --epochs=10 "
    "--target_epsilon=2\n"
    "--solve_for=noise_multiplier: the smallest noise multiplier, within 0.1%;\n"
    "--solve_for=steps: the largest number of steps (one more misses the target; also "
    "reported in epochs);\n"
    "--solve_for=sampling_rate: the largest Poisson sampling rate, within 0.1% (with "
    "--epochs the steps are ceil(epochs / q)).\n"
    "The answer meets the target when re-accounted (pld and rdp: certified upper bound; "
    "gdp: CLT approximation); rdp converts with --rdp_conversion and pld "
    "uses --epsilon_tolerance, as dpkit epsilon does.",
    {SolveForFlag(), "sampling_rate", "dataset_size", "batch_size", "noise_multiplier", "steps",
     "epochs", "target_epsilon", "delta", CalibrateAccountantFlag(), RdpConversionFlag(),
     "epsilon_tolerance", ReportFormatFlag()},
    &RunCalibrate}));

}  // namespace dpkit::tools
