#include "dpkit/models/engine/epoch_report.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dpkit/models/training_ledger.h"

namespace dpkit::models {
namespace {

const char kNotPrivateNote[] = "not private: --noise_multiplier=0 adds no noise";

int64_t CeilDiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

}  // namespace

std::string EpochLabel(int64_t step, int64_t steps_per_epoch, int64_t total_steps) {
  return absl::StrCat("epoch ", CeilDiv(step, steps_per_epoch), "/",
                      CeilDiv(total_steps, steps_per_epoch), " (step ", step, "/", total_steps,
                      ")");
}

EpochReport::EpochReport(const RunPlan& plan, bool json, std::string ledger_path,
                         const std::string& metrics_path)
    : plan_(plan), json_(json), ledger_path_(std::move(ledger_path)) {
  if (!metrics_path.empty()) metrics_.open(metrics_path, std::ios::app);
}

namespace {

// How the header names the run's batches.
const char* BatchesText(const DpStepOptions& step) {
  if (step.shuffled()) return "shuffled fixed-size batches (NOT covered by the accountants)";
  if (step.fixed_size()) {
    return "fixed-size batches without replacement (replace-one adjacency)";
  }
  if (step.user_level()) return "Poisson-sampled users (user-level DP: n, q, B count users)";
  return "Poisson batches";
}

}  // namespace

void EpochReport::PrintHeader(const std::string& threads, const std::string& output) const {
  if (json_) return;
  const PrivacySettings& p = plan_.privacy;
  std::printf(
      "dpkit train %s: n=%lld, q=%.6g, sigma=%.6g%s, C=%g (%s clipping%s), %s lr=%g, %lld steps "
      "(%lld per epoch, epochs=%g), %s, delta=%g, %s%s\n",
      plan_.model.c_str(), static_cast<long long>(plan_.train_size), p.sampling_rate,
      p.noise_multiplier,
      plan_.sigma_source == "calibrated"   ? " (calibrated)"
      : plan_.sigma_source == "checkpoint" ? " (checkpoint)"
                                           : "",
      p.clip_norm, plan_.step.clipping_name.c_str(),
      plan_.step.microbatch_size > 1
          ? absl::StrCat(", microbatches of ", plan_.step.microbatch_size, ": sensitivity 2C").c_str()
          : "",
      plan_.optimizer.c_str(), plan_.learning_rate, static_cast<long long>(plan_.total_steps),
      static_cast<long long>(plan_.steps_per_epoch), plan_.epochs,
      BatchesText(plan_.step),
      p.delta, threads.empty() ? "" : (threads + ", ").c_str(), output.c_str());
  std::fflush(stdout);
}

absl::Status EpochReport::Report(int64_t step, const nlohmann::json& metrics,
                                 const std::string& text, double seconds) {
  nlohmann::json epsilon = nullptr;
  if (!ledger_path_.empty()) {
    double upper = 0;
    absl::StatusOr<nlohmann::json> eps = LedgerEpsilon(ledger_path_, plan_.privacy.delta, &upper);
    if (!eps.ok()) return eps.status();
    epsilon = *std::move(eps);
  }
  // "epoch": the epoch number of EpochLabel (a last epoch cut short still counts whole);
  // "epochs_completed": the fraction of the data seen so far, in epochs.
  const double completed =
      static_cast<double>(step) / static_cast<double>(plan_.steps_per_epoch);
  nlohmann::json line = {{"epoch", CeilDiv(step, plan_.steps_per_epoch)},
                         {"epochs_completed", completed},
                         {"step", step},
                         {"total_steps", plan_.total_steps}};
  for (const auto& [key, value] : metrics.items()) line[key] = value;
  line["epsilon"] = epsilon;
  line["delta"] = plan_.privacy.delta;
  line["noise_multiplier"] = plan_.privacy.noise_multiplier;
  line["sampling_rate"] = plan_.privacy.sampling_rate;
  line["sampler"] = plan_.step.sampler;
  if (plan_.step.user_level()) line["privacy_unit"] = "user";
  line["microbatch_size"] = plan_.step.microbatch_size;
  line["seconds"] = seconds;
  std::string epsilon_text;
  if (!plan_.private_run()) {
    line["epsilon_note"] = kNotPrivateNote;
    epsilon_text = kNotPrivateNote;
  } else if (plan_.step.shuffled()) {
    line["epsilon_note"] = std::string(kShuffledNote);
    epsilon_text = absl::StrCat("epsilon ", kShuffledNote);
  } else {
    // The headline is the smallest certified upper bound (accounting/report.h).
    epsilon_text = EpsilonText(epsilon, plan_.privacy.delta);
  }
  if (json_) {
    std::printf("%s\n", line.dump().c_str());
  } else {
    // The privacy bound first: it is what decides whether the model may ship.
    std::printf("%s: %s; %s, %.1f s\n",
                EpochLabel(step, plan_.steps_per_epoch, plan_.total_steps).c_str(),
                epsilon_text.c_str(), text.c_str(), seconds);
  }
  std::fflush(stdout);
  if (metrics_.is_open()) {
    metrics_ << line.dump() << "\n";
    metrics_.flush();
    if (!metrics_) return absl::InternalError("cannot append to metrics.jsonl");
  }
  return absl::OkStatus();
}

}  // namespace dpkit::models
