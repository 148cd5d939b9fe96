#include "dpkit/models/training_ledger.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>
#include <memory>
#include <variant>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/accounting/calibrate.h"
#include "dpkit/accounting/conversions.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/accounting/report.h"

namespace dpkit::models {
namespace {

absl::Status FromResult(const std::string& what, const std::string& error) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", error));
}

}  // namespace

absl::StatusOr<TrainingLedger> TrainingLedger::Open(const std::string& path) {
  auto writer = accounting::LedgerWriter::Open(path);
  if (!writer.ok()) return absl::NotFoundError(writer.error());
  return TrainingLedger(std::make_unique<accounting::LedgerWriter>(std::move(*writer)));
}

TrainingLedger::TrainingLedger(TrainingLedger&& other) noexcept = default;
TrainingLedger& TrainingLedger::operator=(TrainingLedger&& other) noexcept = default;
TrainingLedger::~TrainingLedger() = default;

absl::Status TrainingLedger::AppendStep(const accounting::SamplingRecord& record) {
  auto appended = writer_->Append(record);
  if (!appended.ok()) return absl::InternalError(appended.error());
  return absl::OkStatus();
}

absl::Status TrainingLedger::AppendEvent(const accounting::Event& event) {
  auto appended = writer_->Append(event);
  if (!appended.ok()) return absl::InternalError(appended.error());
  return absl::OkStatus();
}

absl::StatusOr<accounting::Event> LedgerFileToEvent(const std::string& path, int64_t* steps) {
  *steps = 0;
  auto entries = accounting::ReadLedger(path);
  if (!entries.ok()) return absl::InvalidArgumentError(entries.error());
  for (const accounting::LedgerEntry& e : *entries) {
    if (std::holds_alternative<accounting::SamplingRecord>(e.record)) ++*steps;
  }
  if (entries->empty()) return absl::NotFoundError("empty ledger");
  auto event = accounting::LedgerToEvent(*entries);
  if (!event.ok()) return absl::InvalidArgumentError(event.error());
  return *event;
}

absl::StatusOr<nlohmann::json> LedgerEpsilon(const std::string& path, double delta,
                                             double* epsilon_upper) {
  int64_t steps = 0;
  absl::StatusOr<accounting::Event> event = LedgerFileToEvent(path, &steps);
  accounting::PrivacyReport report;
  if (absl::IsNotFound(event.status()) && event.status().message() == "empty ledger") {
    report = accounting::EmptyRunReport(accounting::ReportQuantity::kEpsilon, delta);
  } else {
    if (!event.ok()) return event.status();
    // The accounting report of `dpkit ledger` (accounting/report.h) without the minimum
    // error figures, which would double the cost of every epoch's report.
    accounting::ReportOptions options;
    options.min_errors = false;
    report = accounting::ComputeReport(*event, accounting::ReportQuantity::kEpsilon, delta,
                                       options);
    if (report.rdp.state != accounting::SlotState::kComputed) {
      return FromResult("rdp", report.rdp.message);
    }
  }
  // The headline: the smallest certified upper bound, named in the JSON.
  *epsilon_upper = accounting::ReportHeadline(report)->value;
  return accounting::ReportToJson(report);
}

std::string EpsilonText(const nlohmann::json& eps, double delta) {
  // The accounting report's one-line form: the headline rounded up, named.
  accounting::Result<accounting::PrivacyReport> report =
      accounting::ReportFromJson(eps, accounting::ReportQuantity::kEpsilon, delta);
  if (!report.ok()) return "eps: " + report.error();
  return accounting::ReportToLine(*report);
}

absl::StatusOr<double> CalibrateNoiseMultiplierRdp(double target_epsilon, double delta,
                                                   double sampling_rate, int64_t steps) {
  // //accounting:calibrate: the returned sigma meets the target when re-accounted and is
  // within 0.1 % of the smallest that does.
  accounting::CalibrationOptions options;
  options.rdp_conversion = accounting::CalibrationOptions::RdpConversion::kOptimal;
  auto calibration = accounting::CalibrateNoiseMultiplier(
      target_epsilon, delta, sampling_rate, steps, accounting::Accountant::kRdp, options);
  if (!calibration.ok()) return absl::InvalidArgumentError(calibration.error());
  // A ledger records noise multipliers down to accounting::kMinFileNoiseMultiplier only
  // (accounting/event.h). A huge target can calibrate below it; epsilon decreases in the
  // noise multiplier, so the floor still meets the target, and the run stays recordable.
  return std::max(calibration->noise_multiplier, accounting::kMinFileNoiseMultiplier);
}

absl::StatusOr<double> CalibrateFixedSizeNoiseMultiplier(double target_epsilon, double delta,
                                                         int64_t population,
                                                         int64_t sample_size, int64_t steps) {
  if (!(std::isfinite(target_epsilon) && target_epsilon > 0) || !(delta > 0 && delta < 1) ||
      steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration needs target_epsilon > 0, delta in (0, 1) and steps >= 1, got ",
        target_epsilon, ", ", delta, ", ", steps));
  }
  // //accounting:calibrate on the event's noise multiplier z = sigma / 2, by each
  // accountant whose bound the run's report prints (RDP with the optimal conversion, and
  // PLD); the smaller z meets the target by its own certified bound, so the report's
  // headline (the smaller upper bound) meets it too.
  accounting::CalibrationOptions options;
  options.rdp_conversion = accounting::CalibrationOptions::RdpConversion::kOptimal;
  auto rdp = accounting::CalibrateWithoutReplacementNoiseMultiplier(
      target_epsilon, delta, population, sample_size, steps, accounting::Accountant::kRdp,
      options);
  auto pld = accounting::CalibrateWithoutReplacementNoiseMultiplier(
      target_epsilon, delta, population, sample_size, steps, accounting::Accountant::kPld,
      options);
  if (!rdp.ok() && !pld.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--target_epsilon=", target_epsilon, ": ",
                                                   rdp.error()));
  }
  double z = rdp.ok() ? rdp->noise_multiplier : pld->noise_multiplier;
  if (pld.ok()) z = std::min(z, pld->noise_multiplier);
  // A ledger records noise multipliers down to kMinFileNoiseMultiplier (z); epsilon
  // decreases in sigma, so the floor still meets the target.
  return 2 * std::max(z, accounting::kMinFileNoiseMultiplier);
}

namespace {

// RDP epsilon (optimal conversion) of `event` at delta.
absl::StatusOr<double> RdpEpsilonOf(const accounting::Event& event, double delta) {
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  auto rdp = accounting::ComputeRdp(event, orders);
  if (!rdp.ok()) return FromResult("calibration", rdp.error());
  auto eps = accounting::RdpToEpsilonOptimal(orders, *rdp, delta);
  if (!eps.ok()) return FromResult("calibration", eps.error());
  return eps->epsilon;
}

}  // namespace

absl::StatusOr<double> CalibrateRunNoiseMultiplierRdp(
    double target_epsilon, double delta, double floor_sigma,
    const std::function<absl::StatusOr<accounting::Event>(double sigma)>& run_event) {
  if (!(std::isfinite(target_epsilon) && target_epsilon > 0) || !(delta > 0 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration needs target_epsilon > 0 and delta in (0, 1), got ", target_epsilon, ", ",
        delta));
  }
  const auto epsilon = [&](double sigma) -> absl::StatusOr<double> {
    absl::StatusOr<accounting::Event> event = run_event(sigma);
    if (!event.ok()) return event.status();
    return RdpEpsilonOf(*event, delta);
  };
  // Epsilon decreases in sigma: find hi meeting the target, then bisect in log space.
  constexpr double kMaxSigma = 1e6;
  double hi = 1;
  for (;;) {
    absl::StatusOr<double> eps = epsilon(hi);
    if (!eps.ok()) return eps.status();
    if (*eps <= target_epsilon) break;
    if (hi >= kMaxSigma) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--target_epsilon=", target_epsilon, " is not reached with a noise multiplier <= 1e6"));
    }
    hi *= 2;
  }
  double lo = hi / 2;  // when hi > 1: the last sigma that missed the target
  if (hi == 1) {
    // Search downwards for a sigma that misses the target, down to the floor.
    for (;;) {
      lo = std::max(hi / 2, floor_sigma);
      if (lo == hi) return hi;  // the floor meets the target
      absl::StatusOr<double> eps = epsilon(lo);
      if (!eps.ok()) return eps.status();
      if (*eps > target_epsilon) break;
      hi = lo;
    }
  }
  // Invariant: eps(lo) > target >= eps(hi).
  while (hi / lo > 1.001) {
    const double mid = std::sqrt(lo * hi);
    absl::StatusOr<double> eps = epsilon(mid);
    if (!eps.ok()) return eps.status();
    (*eps <= target_epsilon ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace dpkit::models
