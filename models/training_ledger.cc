#include "dpkit/models/training_ledger.h"

#include <algorithm>
#include <cmath>
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

namespace {

// The headline epsilon of T fixed-size steps at noise multiplier sigma, as the run's
// report computes it (accounting/report.h, default options): the smaller certified upper
// bound of RDP (optimal conversion) and PLD (replace-one, accounting/pld.h), or RDP alone
// where PLD is not applicable. PLD's lower bound on the mechanism is not needed here.
absl::StatusOr<double> FixedSizeEpsilon(double sigma, double delta, int64_t population,
                                        int64_t sample_size, int64_t steps) {
  auto gaussian = accounting::Event::Gaussian(sigma / 2);
  if (!gaussian.ok()) return FromResult("calibration", gaussian.error());
  auto step = accounting::Event::SampledWithoutReplacement(population, sample_size, *gaussian);
  if (!step.ok()) return FromResult("calibration", step.error());
  auto run = accounting::Event::SelfComposed(*step, steps);
  if (!run.ok()) return FromResult("calibration", run.error());
  const std::vector<double> orders = accounting::DefaultRdpOrders();
  auto rdp = accounting::ComputeRdp(*run, orders);
  if (!rdp.ok()) return FromResult("calibration", rdp.error());
  auto eps = accounting::RdpToEpsilonOptimal(orders, *rdp, delta);
  if (!eps.ok()) return FromResult("calibration", eps.error());
  accounting::PldOptions pld_options;
  pld_options.mechanism_lower_bound = false;
  auto pld = accounting::PldEpsilon(*run, delta, pld_options);
  if (pld.ok()) return std::min(eps->epsilon, pld->epsilon_upper);
  return eps->epsilon;
}

}  // namespace

absl::StatusOr<double> CalibrateFixedSizeNoiseMultiplier(double target_epsilon, double delta,
                                                            int64_t population,
                                                            int64_t sample_size, int64_t steps) {
  if (!(std::isfinite(target_epsilon) && target_epsilon > 0) || !(delta > 0 && delta < 1) ||
      steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration needs target_epsilon > 0, delta in (0, 1) and steps >= 1, got ",
        target_epsilon, ", ", delta, ", ", steps));
  }
  // Epsilon decreases in sigma: find hi meeting the target, then bisect in log space.
  // The smallest sigma a ledger records is 2 kMinFileNoiseMultiplier (z = sigma / 2).
  constexpr double kMaxSigma = 1e6;
  const double floor_sigma = 2 * accounting::kMinFileNoiseMultiplier;
  double hi = 1;
  for (;;) {
    absl::StatusOr<double> eps = FixedSizeEpsilon(hi, delta, population, sample_size, steps);
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
    // Search downwards for a sigma that misses the target, down to the ledger's floor.
    for (;;) {
      lo = std::max(hi / 2, floor_sigma);
      if (lo == hi) return hi;  // the floor meets the target
      absl::StatusOr<double> eps = FixedSizeEpsilon(lo, delta, population, sample_size, steps);
      if (!eps.ok()) return eps.status();
      if (*eps > target_epsilon) break;
      hi = lo;
    }
  }
  // Invariant: eps(lo) > target >= eps(hi).
  while (hi / lo > 1.001) {
    const double mid = std::sqrt(lo * hi);
    absl::StatusOr<double> eps = FixedSizeEpsilon(mid, delta, population, sample_size, steps);
    if (!eps.ok()) return eps.status();
    (*eps <= target_epsilon ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace dpkit::models
