// Run planning of the training engine, done once per run: the privacy-relevant settings
// (sigma from --noise_multiplier, --target_epsilon's calibration or the checkpoint; the
// expected batch size and q; clip norm, clipping mode / groups / scales, microbatching,
// sampler, delta; the task's own privacy flags) and the schedule (steps per epoch, total
// steps). On --resume the checkpoint's settings are restored without their flags, a flag
// that contradicts them is refused with one line naming the flag and the checkpoint value,
// and --target_epsilon is refused (sigma was calibrated for the run's planned steps when it
// started; recalibrating would not count the steps already taken).
#ifndef DPKIT_MODELS_ENGINE_RUN_PLAN_H_
#define DPKIT_MODELS_ENGINE_RUN_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dpkit/models/dp_step_options.h"
#include "dpkit/models/train_metrics.h"
#include "dpkit/models/trainer_registry.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {

// What a checkpoint stores about privacy; restored on --resume.
struct PrivacySettings {
  double noise_multiplier = 0;
  int64_t batch_size = 0;
  double sampling_rate = 0;
  double clip_norm = 0;
  double delta = 1e-5;
  // The privacy-relevant extra flags as given to the run (--clipping, --clipping_groups,
  // --clipping_scales, --microbatch_size, --sampler and the task's own, e.g. word2vec's
  // --algorithm and --selection_epsilon): name -> value.
  std::map<std::string, std::string> flags;
};

nlohmann::json PrivacySettingsToJson(const PrivacySettings& settings);
// InvalidArgument naming `file` when a field is missing or of the wrong type.
absl::StatusOr<PrivacySettings> PrivacySettingsFromJson(const nlohmann::json& json,
                                                        const std::string& file);

struct RunPlan {
  std::string model;
  int64_t train_size = 0;   // n
  PrivacySettings privacy;  // sigma, B, q, C, delta, privacy flags
  std::string sigma_source; // "flag" | "default" | "calibrated" | "checkpoint"
  DpStepOptions step;       // parsed privacy-step flags (clipping, microbatches, sampler)
  TrainMetricsOptions metrics;  // --train_metrics (models/train_metrics.h)
  double learning_rate = 0;
  std::string optimizer;
  int64_t steps_per_epoch = 1;
  double epochs = 1;  // as planned (--epochs or the default); --max_steps may stop earlier
  int64_t total_steps = 1;
  std::string device = "cpu";
  bool private_run() const { return privacy.noise_multiplier > 0; }
  // Poisson-sampled private steps: the only runs whose ledger the accountants certify.
  bool certified() const { return private_run() && !step.shuffled(); }
};

// Restores the checkpoint's privacy flags (`privacy_flags` of `resumed`) into
// options->extra_flags: a flag not given takes the checkpoint's value; a given one that
// differs is refused (InvalidArgument naming the flag, both values and `file`).
absl::Status ApplyCheckpointFlags(const PrivacySettings& resumed,
                                  const std::vector<std::string>& privacy_flags,
                                  const std::string& file, TrainOptions* options);

// Plans a run of a task with `train_size` examples. `privacy_flags` are the task's extra
// flags stored in the checkpoint; `resumed` is the checkpoint's settings (nullptr for a
// fresh run; `checkpoint_file` names it in messages).
absl::StatusOr<RunPlan> PlanRun(const TrainOptions& options, const TaskDefaults& defaults,
                                int64_t train_size, const std::vector<std::string>& privacy_flags,
                                const PrivacySettings* resumed, const std::string& checkpoint_file);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_RUN_PLAN_H_
