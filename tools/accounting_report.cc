#include "dpkit/tools/accounting_report.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/report.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/common_flags.h"

ABSL_FLAG(double, epsilon_tolerance, 1e-4,
          "pld accountant: requested relative accuracy of epsilon, in [1e-7, 0.1]");

namespace dpkit::tools {
namespace {

using accounting::AccountantSlot;
using accounting::SlotState;
using nlohmann::json;

// Largest step count derived from --epochs (keeps int64 arithmetic exact).
constexpr double kMaxSteps = 1e12;

// The error policy of accounting_report.h for one accountant's slot.
template <typename T>
absl::Status SlotStatus(const char* name, const AccountantSlot<T>& slot, bool all) {
  if (slot.state == SlotState::kNotApplicable && !all) {
    return absl::InvalidArgumentError(
        absl::StrCat("--accountant=", name, " cannot account this: ", slot.message));
  }
  if (slot.state == SlotState::kFailed) {
    // The core's errors are properties of the input (base/status.h's one mapping).
    return base::WithContext(base::ToStatus(accounting::Error{slot.message}), name);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> AccountantChoices() { return {"rdp", "gdp", "pld", "all"}; }

FlagSpec AccountantFlag() { return FlagSpec("accountant", "all", AccountantChoices()); }
FlagSpec ReportFormatFlag() { return FlagSpec("format", "text", {"text", "json"}); }
FlagSpec RdpConversionFlag() {
  return FlagSpec("rdp_conversion", "optimal", {"optimal", "improved", "classic"});
}

absl::Status CheckAccountant(const std::string& accountant_flag) {
  return CheckOneOf("accountant", accountant_flag, AccountantChoices());
}

absl::StatusOr<accounting::ReportOptions> ReportOptionsFromFlags(
    const std::string& accountant_flag) {
  RETURN_IF_ERROR(CheckAccountant(accountant_flag));
  accounting::ReportOptions options;
  const bool all = accountant_flag == "all";
  options.rdp = all || accountant_flag == "rdp";
  options.gdp = all || accountant_flag == "gdp";
  options.pld = all || accountant_flag == "pld";
  const std::string conversion = absl::GetFlag(FLAGS_rdp_conversion);
  RETURN_IF_ERROR(CheckOneOf("rdp_conversion", conversion, RdpConversionFlag().choices));
  ASSIGN_OR_RETURN(options.rdp_conversion, accounting::ParseRdpReportConversion(conversion));
  options.pld_options.epsilon_tolerance = absl::GetFlag(FLAGS_epsilon_tolerance);
  if (!(options.pld_options.epsilon_tolerance >= 1e-7 &&
        options.pld_options.epsilon_tolerance <= 0.1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--epsilon_tolerance must be in [1e-7, 0.1], got ",
                     FormatNumber(options.pld_options.epsilon_tolerance)));
  }
  return options;
}

absl::StatusOr<accounting::PrivacyReport> AccountingReport(const accounting::Event& event,
                                                           accounting::ReportQuantity quantity,
                                                           double fixed,
                                                           const std::string& accountant_flag) {
  ASSIGN_OR_RETURN(const accounting::ReportOptions options,
                   ReportOptionsFromFlags(accountant_flag));
  accounting::PrivacyReport report = accounting::ComputeReport(event, quantity, fixed, options);
  const bool all = accountant_flag == "all";
  RETURN_IF_ERROR(SlotStatus("rdp", report.rdp, all));
  RETURN_IF_ERROR(SlotStatus("gdp", report.gdp, all));
  RETURN_IF_ERROR(SlotStatus("pld", report.pld, all));
  return report;
}

json JsonNumber(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

json DpSgdParameters::ToJson() const {
  return json{{"sampling_rate", sampling_rate},
              {"noise_multiplier", noise_multiplier},
              {"steps", steps}};
}

absl::StatusOr<int64_t> StepsForEpochs(double epochs, double dataset_size,
                                       double batch_size) {
  absl::Status ok = CheckFinitePositive("epochs", epochs);
  if (!ok.ok()) return ok;
  // ceil(epochs * n / b) in long double: exact for integral epochs and n < 2^53.
  const long double steps = std::ceil(static_cast<long double>(epochs) * dataset_size /
                                      static_cast<long double>(batch_size));
  if (!(steps <= kMaxSteps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--epochs gives more than 1e12 steps, got ", FormatNumber(epochs)));
  }
  return static_cast<int64_t>(std::max(1.0L, steps));
}

absl::StatusOr<DpSgdParameters> DpSgdParametersFromFlags() {
  DpSgdParameters p;
  const bool rate = FlagGiven("sampling_rate");
  const bool dataset = FlagGiven("dataset_size");
  const bool batch = FlagGiven("batch_size");
  double n = 0, b = 0;
  if (rate && (dataset || batch)) {
    return absl::InvalidArgumentError(
        "give either --sampling_rate or --dataset_size with --batch_size, not both");
  }
  if (rate) {
    p.sampling_rate = absl::GetFlag(FLAGS_sampling_rate);
    absl::Status s = CheckHalfOpenUnit("sampling_rate", p.sampling_rate);
    if (!s.ok()) return s;
  } else if (dataset || batch) {
    if (!dataset) {
      return absl::InvalidArgumentError(
          "--dataset_size (an integer >= 1) is required with --batch_size");
    }
    if (!batch) {
      return absl::InvalidArgumentError(
          "--batch_size (an integer in [1, dataset_size]) is required with --dataset_size");
    }
    const int64_t dataset_size = absl::GetFlag(FLAGS_dataset_size);
    const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
    absl::Status s = CheckPositiveInt("dataset_size", dataset_size);
    if (!s.ok()) return s;
    s = CheckPositiveInt("batch_size", batch_size);
    if (!s.ok()) return s;
    if (batch_size > dataset_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch_size must be in [1, dataset_size = ", dataset_size, "], got ",
          batch_size));
    }
    n = static_cast<double>(dataset_size);
    b = static_cast<double>(batch_size);
    p.sampling_rate = b / n;
  } else {
    return absl::InvalidArgumentError(
        "--sampling_rate (in (0, 1]) or --dataset_size and --batch_size is required");
  }

  if (!FlagGiven("noise_multiplier")) {
    return absl::InvalidArgumentError("--noise_multiplier (finite, > 0) is required");
  }
  p.noise_multiplier = absl::GetFlag(FLAGS_noise_multiplier);
  absl::Status s = CheckFinitePositive("noise_multiplier", p.noise_multiplier);
  if (!s.ok()) return s;

  const bool steps = FlagGiven("steps");
  const bool epochs = FlagGiven("epochs");
  if (steps && epochs) {
    return absl::InvalidArgumentError("give either --steps or --epochs, not both");
  }
  if (steps) {
    p.steps = absl::GetFlag(FLAGS_steps);
    s = CheckPositiveInt("steps", p.steps);
    if (!s.ok()) return s;
  } else if (epochs) {
    auto from_epochs = n > 0 ? StepsForEpochs(absl::GetFlag(FLAGS_epochs), n, b)
                             : StepsForEpochs(absl::GetFlag(FLAGS_epochs), 1.0,
                                              p.sampling_rate);
    if (!from_epochs.ok()) return from_epochs.status();
    p.steps = *from_epochs;
  } else {
    return absl::InvalidArgumentError(
        "--steps (an integer >= 1) or --epochs (finite, > 0) is required");
  }
  return p;
}

bool WarnIfDeltaNotBelowInverseDatasetSize(double delta) {
  if (!FlagGiven("dataset_size")) return false;
  const int64_t n = absl::GetFlag(FLAGS_dataset_size);
  if (n <= 0 || delta < 1.0 / static_cast<double>(n)) return false;
  std::fprintf(stderr,
               "dpkit: warning: --delta=%s is not below 1/n = 1/%lld (--dataset_size): "
               "publishing one random record in full meets it; choose delta well below 1/n\n",
               FormatNumber(delta).c_str(), static_cast<long long>(n));
  return true;
}

absl::StatusOr<bool> JsonFormatFromFlags() {
  const std::string format = absl::GetFlag(FLAGS_format);
  absl::Status s = CheckOneOf("format", format, ReportFormatFlag().choices);
  if (!s.ok()) return s;
  return format == "json";
}

void PrintReport(const json& json_value, const std::string& text, bool as_json) {
  if (as_json) {
    std::printf("%s\n", json_value.dump(2).c_str());
  } else {
    std::fputs(text.c_str(), stdout);
  }
}

absl::StatusOr<EventQuery> EventQueryFromFlags() {
  EventQuery query;
  ASSIGN_OR_RETURN(query.as_json, JsonFormatFromFlags());
  query.accountant = absl::GetFlag(FLAGS_accountant);
  RETURN_IF_ERROR(ReportOptionsFromFlags(query.accountant));
  query.want_delta = FlagGiven("epsilon");
  if (query.want_delta && FlagGiven("delta")) {
    return absl::InvalidArgumentError(
        "give either --delta (report epsilon) or --epsilon (report delta), not both");
  }
  query.delta = absl::GetFlag(FLAGS_delta);
  query.epsilon = absl::GetFlag(FLAGS_epsilon);
  if (query.want_delta) {
    RETURN_IF_ERROR(CheckFiniteNonNegative("epsilon", query.epsilon));
  } else {
    RETURN_IF_ERROR(CheckDelta("delta", query.delta));
  }
  return query;
}

absl::Status PrintEventReport(const EventQuery& query, const accounting::Event& event,
                              nlohmann::json input, const std::string& heading) {
  ASSIGN_OR_RETURN(
      const accounting::PrivacyReport report,
      AccountingReport(event,
                       query.want_delta ? accounting::ReportQuantity::kDelta
                                        : accounting::ReportQuantity::kEpsilon,
                       query.want_delta ? query.epsilon : query.delta, query.accountant));
  nlohmann::json out = accounting::ReportToJson(report);
  input["event"] = event.ToJson();
  if (query.want_delta) {
    input["epsilon"] = query.epsilon;
  } else {
    input["delta"] = query.delta;
  }
  out["input"] = std::move(input);
  const std::string text = absl::StrCat(
      heading,
      query.want_delta ? "epsilon = " + FormatNumber(query.epsilon)
                       : "delta = " + FormatNumber(query.delta),
      "\n", accounting::ReportToText(report));
  PrintReport(out, text, query.as_json);
  return absl::OkStatus();
}

}  // namespace dpkit::tools
