#include "dpkit/models/engine/run_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/event.h"
#include "dpkit/models/train_metrics.h"
#include "dpkit/models/training_ledger.h"
#include "dpkit/optim/poisson_sampler.h"

namespace dpkit::models {
namespace {

// Two flag values are the same setting when equal as text or as numbers ("1" and "1.0").
bool SameValue(const std::string& a, const std::string& b) {
  if (a == b) return true;
  double x = 0, y = 0;
  return absl::SimpleAtod(a, &x) && absl::SimpleAtod(b, &y) && x == y;
}

// The shortest %g text that reads back as `value` ("0.7", "2", "1e-05").
std::string Number(double value) {
  char text[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

absl::Status Contradicts(const std::string& flag, const std::string& given,
                         const std::string& stored, const std::string& file) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, "=", given, " contradicts the checkpoint's ", flag, " = ", stored, " (", file,
      "); resume without the flag to keep it, or start a new run with --overwrite"));
}

}  // namespace

nlohmann::json PrivacySettingsToJson(const PrivacySettings& s) {
  return {{"noise_multiplier", s.noise_multiplier}, {"batch_size", s.batch_size},
          {"sampling_rate", s.sampling_rate},       {"clip_norm", s.clip_norm},
          {"delta", s.delta},                       {"flags", s.flags}};
}

absl::StatusOr<PrivacySettings> PrivacySettingsFromJson(const nlohmann::json& j,
                                                        const std::string& file) {
  auto bad = [&](const char* field) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not a dpkit checkpoint (", field, " missing or of the wrong type)"));
  };
  if (!j.is_object()) return bad("privacy");
  PrivacySettings s;
  for (auto [name, target] : {std::pair<const char*, double*>{"noise_multiplier", &s.noise_multiplier},
                              {"sampling_rate", &s.sampling_rate},
                              {"clip_norm", &s.clip_norm},
                              {"delta", &s.delta}}) {
    if (!j.contains(name) || !j[name].is_number()) return bad(name);
    *target = j[name].get<double>();
    if (!std::isfinite(*target) || *target < 0) return bad(name);
  }
  if (!j.contains("batch_size") || !j["batch_size"].is_number_integer()) return bad("batch_size");
  s.batch_size = j["batch_size"].get<int64_t>();
  if (!j.contains("flags") || !j["flags"].is_object()) return bad("flags");
  for (const auto& [name, value] : j["flags"].items()) {
    if (!value.is_string()) return bad("flags");
    s.flags[name] = value.get<std::string>();
  }
  return s;
}

absl::Status ApplyCheckpointFlags(const PrivacySettings& resumed,
                                  const std::vector<std::string>& privacy_flags,
                                  const std::string& file, TrainOptions* o) {
  for (const std::string& name : privacy_flags) {
    const auto stored = resumed.flags.find(name);
    if (stored == resumed.flags.end()) continue;
    const auto given = o->extra_flags.find(name);
    if (o->given_flags.count(name) && given != o->extra_flags.end() &&
        !SameValue(given->second, stored->second)) {
      return Contradicts(name, given->second, stored->second, file);
    }
    o->extra_flags[name] = stored->second;
  }
  return absl::OkStatus();
}

namespace {

// A flag given with --resume must equal the checkpoint's value (issue 21: a resumed run
// never changes what the ledger's earlier steps were accounted with).
absl::Status ResumedSettingsAgree(const TrainOptions& o, const PrivacySettings& resumed,
                                  const std::string& file) {
  if (o.batch_size && *o.batch_size != resumed.batch_size) {
    return Contradicts("batch_size", absl::StrCat(*o.batch_size),
                       absl::StrCat(resumed.batch_size), file);
  }
  if (o.clip_norm && *o.clip_norm != resumed.clip_norm) {
    return Contradicts("clip_norm", Number(*o.clip_norm), Number(resumed.clip_norm), file);
  }
  if (o.given_flags.count("delta") && o.delta != resumed.delta) {
    return Contradicts("delta", Number(o.delta), Number(resumed.delta), file);
  }
  if (o.noise_multiplier && *o.noise_multiplier != resumed.noise_multiplier) {
    return Contradicts("noise_multiplier", Number(*o.noise_multiplier),
                       Number(resumed.noise_multiplier), file);
  }
  return absl::OkStatus();
}

// The number of epoch ends of a run (each releases the private training metrics once):
// every full epoch, and a last partial one.
int64_t EpochEnds(const RunPlan& plan) {
  return plan.total_steps / plan.steps_per_epoch + (plan.total_steps % plan.steps_per_epoch != 0);
}

// sigma for --target_epsilon with --train_metrics=private: the T Poisson-sampled steps
// composed with the planned releases (train_metrics.h) meet the target by RDP.
absl::StatusOr<double> CalibrateWithTrainMetrics(double target_epsilon, const RunPlan& plan) {
  absl::StatusOr<accounting::Event> release = TrainMetricsEvent(plan.metrics);
  if (!release.ok()) return release.status();
  auto releases = accounting::Event::SelfComposed(*release, EpochEnds(plan));
  if (!releases.ok()) return absl::InvalidArgumentError(releases.error());
  return CalibrateRunNoiseMultiplierRdp(
      target_epsilon, plan.privacy.delta, accounting::kMinFileNoiseMultiplier,
      [&](double sigma) -> absl::StatusOr<accounting::Event> {
        auto steps = accounting::DpSgdEvent(plan.privacy.sampling_rate, sigma, plan.total_steps);
        if (!steps.ok()) return absl::InvalidArgumentError(steps.error());
        auto run = accounting::Event::Composed({*steps, *releases});
        if (!run.ok()) return absl::InvalidArgumentError(run.error());
        return *run;
      });
}

}  // namespace

absl::StatusOr<RunPlan> PlanRun(const TrainOptions& o, const TaskDefaults& d, int64_t n,
                                const std::vector<std::string>& privacy_flags,
                                const PrivacySettings* resumed, const std::string& file) {
  if (n < 1) return absl::InvalidArgumentError("the training set is empty");
  if (resumed != nullptr && o.target_epsilon) {
    // The calibrated sigma holds for the run's planned steps from its start; recalibrating
    // for a longer run would not count the steps already taken at the old sigma.
    return absl::InvalidArgumentError(
        "--target_epsilon cannot be combined with --resume (sigma was calibrated when the run "
        "started and is kept from the checkpoint)");
  }
  // The privacy flags: the checkpoint's unless given; a given one must agree.
  TrainOptions effective = o;
  if (resumed != nullptr) {
    absl::Status applied = ApplyCheckpointFlags(*resumed, privacy_flags, file, &effective);
    if (!applied.ok()) return applied;
  }
  RunPlan plan;
  plan.model = o.model;
  plan.train_size = n;
  plan.device = o.device;
  PrivacySettings& p = plan.privacy;
  p.batch_size = o.batch_size.value_or(d.batch_size);
  p.clip_norm = o.clip_norm.value_or(d.clip_norm);
  p.delta = o.given_flags.count("delta") ? o.delta : d.delta;
  if (resumed != nullptr) {
    absl::Status agree = ResumedSettingsAgree(o, *resumed, file);
    if (!agree.ok()) return agree;
    p.batch_size = resumed->batch_size;
    p.clip_norm = resumed->clip_norm;
    p.delta = resumed->delta;
  }
  if (p.batch_size > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size must be <= the number of training examples (", n, "), got ", p.batch_size));
  }
  absl::StatusOr<DpStepOptions> step =
      ParseDpStepOptions(effective, p.batch_size, d.physical_batch_size);
  if (!step.ok()) return step.status();
  plan.step = *std::move(step);
  absl::StatusOr<optim::StepRecordSampler> sampler = optim::StepRecordSampler::Create(
      n, p.batch_size, plan.step.microbatch_size, plan.step.shuffled());
  if (!sampler.ok()) return sampler.status();
  p.sampling_rate = sampler->sampling_rate();
  if (resumed != nullptr && p.sampling_rate != resumed->sampling_rate) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sampling rate B/n = ", Number(p.sampling_rate), " differs from the checkpoint's ",
        Number(resumed->sampling_rate), " (", file,
        "): the training set changed (--train_subset or --data_dir)"));
  }
  absl::StatusOr<TrainMetricsOptions> metrics = ParseTrainMetricsOptions(effective, p.sampling_rate);
  if (!metrics.ok()) return metrics.status();
  plan.metrics = *std::move(metrics);
  if (plan.metrics.released_privately() &&
      (plan.step.sampler != "poisson" || plan.step.user_level())) {
    // The release is example-level and Poisson-sampled (add/remove adjacency): the ledger
    // must not compose it with replace-one or user-level steps.
    return absl::InvalidArgumentError(
        "--train_metrics=private needs --sampler=poisson and --privacy_unit=example");
  }
  plan.steps_per_epoch = sampler->steps_per_epoch();
  plan.epochs = o.epochs.value_or(d.epochs);
  plan.total_steps = sampler->TotalSteps(plan.epochs);
  if (o.max_steps) plan.total_steps = std::min(plan.total_steps, *o.max_steps);
  plan.total_steps = std::max<int64_t>(plan.total_steps, 1);
  if (resumed != nullptr) {
    p.noise_multiplier = resumed->noise_multiplier;
    plan.sigma_source = "checkpoint";
  } else if (o.target_epsilon) {
    if (d.noise_multiplier == 0) {
      return absl::InvalidArgumentError("--target_epsilon needs a private training algorithm");
    }
    // Fixed-size steps: the replace-one event's headline, PLD or RDP, whichever is smaller
    // (models/training_ledger.h); private training metrics: the steps composed with every
    // epoch's release.
    absl::StatusOr<double> calibrated =
        plan.step.fixed_size()
            ? CalibrateFixedSizeNoiseMultiplier(*o.target_epsilon, p.delta, n, p.batch_size,
                                                plan.total_steps)
        : plan.metrics.released_privately()
            ? CalibrateWithTrainMetrics(*o.target_epsilon, plan)
            : CalibrateNoiseMultiplierRdp(*o.target_epsilon, p.delta, p.sampling_rate,
                                          plan.total_steps);
    if (!calibrated.ok()) return calibrated.status();
    p.noise_multiplier = *calibrated;
    plan.sigma_source = "calibrated";
  } else {
    p.noise_multiplier = o.noise_multiplier.value_or(d.noise_multiplier);
    plan.sigma_source = o.noise_multiplier ? "flag" : "default";
  }
  // The privacy-step flags as parsed (their defaults included), the task's as given.
  const std::map<std::string, std::string> parsed = {
      {"clipping", plan.step.clipping_name},
      {"clipping_groups", plan.step.clipping_groups},
      {"clipping_scales", plan.step.clipping_scales},
      {"microbatch_size", absl::StrCat(plan.step.microbatch_size)},
      {"sampler", plan.step.sampler},
      {"privacy_unit", plan.step.privacy_unit},
      {"user_ids", plan.step.user_ids}};
  for (const std::string& name : privacy_flags) {
    const auto known = parsed.find(name);
    const auto value = effective.extra_flags.find(name);
    if (known != parsed.end()) {
      p.flags[name] = known->second;
    } else if (value != effective.extra_flags.end()) {
      p.flags[name] = value->second;
    }
  }
  if (plan.metrics.released_privately() && !plan.certified()) {
    return absl::InvalidArgumentError(
        "--train_metrics=private needs a private run (noise_multiplier > 0) with a ledger");
  }
  plan.learning_rate = o.learning_rate.value_or(d.learning_rate);
  plan.optimizer = o.optimizer.value_or(d.optimizer);
  return plan;
}

}  // namespace dpkit::models
