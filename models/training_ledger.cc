#include "models/training_ledger.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <variant>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "accounting/calibrate.h"
#include "accounting/conversions.h"
#include "accounting/gdp.h"
#include "accounting/ledger.h"
#include "accounting/pld.h"
#include "accounting/rdp.h"

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
  if (absl::IsNotFound(event.status()) && event.status().message() == "empty ledger") {
    *epsilon_upper = 0;
    return nlohmann::json{{"rdp", {{"epsilon", 0.0}, {"order", nullptr}, {"conversion", "optimal"}}}};
  }
  if (!event.ok()) return event.status();
  std::vector<double> orders = accounting::DefaultRdpOrders();
  auto rdp = accounting::ComputeRdp(*event, orders);
  if (!rdp.ok()) return FromResult("rdp", rdp.error());
  // The optimal conversion (Asoodeh et al. 2021), as `dpkit epsilon` and `dpkit ledger`.
  auto eps = accounting::RdpToEpsilonOptimal(orders, *rdp, delta);
  if (!eps.ok()) return FromResult("rdp", eps.error());
  *epsilon_upper = eps->epsilon;
  nlohmann::json out;
  out["rdp"] = {{"epsilon", eps->epsilon}, {"order", eps->order}, {"conversion", "optimal"}};
  // The PLD accountant's certified bounds (tighter); the headline bound is the smaller of
  // the two certified upper bounds. An event PLD cannot handle leaves RDP alone.
  auto pld = accounting::PldEpsilon(*event, delta);
  if (pld.ok()) {
    out["pld"] = {{"epsilon", pld->epsilon_upper},
                  {"epsilon_upper", pld->epsilon_upper},
                  {"epsilon_lower", pld->epsilon_lower}};
    *epsilon_upper = std::min(*epsilon_upper, pld->epsilon_upper);
  }
  // mu_CLT only for one homogeneous DP-SGD run (Bu et al. 2020, eq. (3.1)).
  const accounting::Event& e = *event;
  if (e.kind() == accounting::EventKind::kSelfComposed &&
      e.inner().kind() == accounting::EventKind::kPoissonSampled &&
      e.inner().inner().kind() == accounting::EventKind::kGaussian) {
    auto mu = accounting::CltMu(e.inner().sampling_rate(), e.inner().inner().noise_multiplier(),
                                e.count());
    if (mu.ok()) {
      auto gdp_eps = accounting::GdpEpsilon(*mu, delta);
      if (gdp_eps.ok()) {
        out["gdp"] = {{"mu", *mu}, {"epsilon", *gdp_eps}, {"approximate", true}};
      }
    }
  }
  return out;
}

std::string EpsilonText(const nlohmann::json& eps, double delta) {
  std::string out =
      eps.contains("pld")
          ? absl::StrFormat("eps <= %.4g (PLD, delta=%g; RDP %.4g)",
                            eps["pld"]["epsilon"].get<double>(), delta,
                            eps["rdp"]["epsilon"].get<double>())
          : absl::StrFormat("eps <= %.4g (RDP, delta=%g)", eps["rdp"]["epsilon"].get<double>(),
                            delta);
  if (eps.contains("gdp")) {
    absl::StrAppendFormat(&out, "; mu_CLT %.3g -> eps ~ %.4g (approximate, not a bound)",
                          eps["gdp"]["mu"].get<double>(), eps["gdp"]["epsilon"].get<double>());
  }
  return out;
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
  return calibration->noise_multiplier;
}

}  // namespace dpkit::models
