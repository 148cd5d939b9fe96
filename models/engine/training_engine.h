// The DP training engine: every `dpkit train` model is a TrainingTask (model, data, loss,
// metrics, the paper's defaults) run by RunTraining, which owns everything else:
//   run planning, once (engine/run_plan.h: sigma from the flag, the calibration or the
//     checkpoint; q; steps; the privacy-step flags);
//   the output directory (engine/checkpoint.h: fresh-run refusal and --overwrite, resume
//     checks, atomic checkpoints written only after the ledger entries they need);
//   the privacy ledger (models/training_ledger.h; a temporary file without --output_dir),
//     to which every step appends its entry BEFORE its update is applied;
//   the per-epoch report (engine/epoch_report.h) with epsilon computed from the ledger file,
//     and the training-set metrics as --train_metrics asks (models/train_metrics.h: exact
//     and labelled not private, released by a DP nested query into the ledger, or none);
//   --resume, with the checkpoint's privacy settings.
// The task's Step is the only model-specific part of a step: LibTorch models share the
// Poisson / clip / noise step of engine/torch_task.h; word2vec's sparse and dense steps are
// their own (models/wide/word2vec_trainer.cc).
#ifndef DPKIT_MODELS_ENGINE_TRAINING_ENGINE_H_
#define DPKIT_MODELS_ENGINE_TRAINING_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/ledger.h"
#include "dpkit/models/engine/run_plan.h"
#include "dpkit/models/train_metrics.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/models/training_ledger.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {

// Where a task records what it spends. Without a ledger (not private, or shuffled batches)
// the appends do nothing. Every append is durable (fsync) when it returns.
class LedgerSink {
 public:
  explicit LedgerSink(TrainingLedger* ledger) : ledger_(ledger) {}
  bool active() const { return ledger_ != nullptr; }
  // The entry of training step `record.step` (a Poisson-sampled step's sum queries).
  absl::Status AppendStep(const accounting::SamplingRecord& record);
  // The entry of training step `step` as an event (e.g. sparse DP-SGD's selection + noise).
  absl::Status AppendStepEvent(const accounting::Event& event, int64_t step);
  // Any other mechanism run on the data (e.g. DP-PCA before training): not a step.
  absl::Status AppendEvent(const accounting::Event& event);
  int64_t steps() const { return steps_; }
  int64_t entries() const { return entries_; }
  void Restore(int64_t steps, int64_t entries) { steps_ = steps, entries_ = entries; }

 private:
  TrainingLedger* ledger_;
  int64_t steps_ = 0, entries_ = 0;
};

// What one step did, for the progress line and the epoch's train loss.
struct StepOutcome {
  double loss_sum = 0;    // sum of the examples' training losses (0 if not computed)
  int64_t examples = 0;   // examples the step saw
  int64_t correct = -1;   // correctly classified of those (-1: not a classifier)
};

class TrainingTask {
 public:
  virtual ~TrainingTask() = default;
  virtual int64_t train_size() const = 0;
  virtual TaskDefaults defaults() const = 0;
  // Extra flags that are privacy-relevant: stored in the checkpoint, restored on --resume.
  virtual std::vector<std::string> privacy_flags() const = 0;
  // Files the task checkpoints (each holds its next step) and other files it writes.
  virtual std::vector<std::string> state_files() const = 0;
  virtual std::vector<std::string> other_files() const { return {}; }
  // Checks the plan against the task (e.g. --clipping_groups against the model's layers)
  // before anything is written; no side effects.
  virtual absl::Status Validate(const RunPlan& /*plan*/) { return absl::OkStatus(); }
  // Once, after planning and before the first step. A fresh run may spend privacy here
  // through `ledger` (DP-PCA); `output_dir` may be empty.
  virtual absl::Status Start(const RunPlan& plan, LedgerSink& ledger, bool resumed,
                             const std::string& output_dir) = 0;
  // One step: appends exactly one step entry to `ledger` (when active) BEFORE applying its
  // update.
  virtual absl::StatusOr<StepOutcome> Step(int64_t step, LedgerSink& ledger) = 0;
  // Test metrics at an epoch end (JSON object) and their short text.
  virtual absl::StatusOr<nlohmann::json> Evaluate() = 0;
  virtual std::string Describe(const nlohmann::json& metrics) const = 0;
  // Writes every state file to dir/NAME + suffix, recording `next_step` in it.
  virtual absl::Status Save(const std::string& dir, const std::string& suffix,
                            int64_t next_step) = 0;
  // Loads the state files of dir; returns the next step they hold. One-line errors.
  virtual absl::StatusOr<int64_t> Load(const std::string& dir) = 0;
  // After the last step (word2vec: summary, curves, audit). `ledger_path` empty: none.
  virtual absl::Status Finish(const RunPlan& /*plan*/, int64_t /*steps*/,
                              const std::string& /*ledger_path*/) {
    return absl::OkStatus();
  }
  // --train_metrics=private (models/train_metrics.h): whether the task can release its
  // training-set metrics by the nested query, and the release at an epoch end, which
  // appends its event to `ledger` BEFORE returning the values.
  virtual bool ReleasesPrivateTrainMetrics() const { return false; }
  virtual absl::StatusOr<TrainMetricsRelease> PrivateTrainMetrics(
      int64_t /*step*/, const TrainMetricsOptions& /*options*/, LedgerSink& /*ledger*/) {
    return absl::InvalidArgumentError("--train_metrics=private is not available for this model");
  }
  // A description of the threads for the header line (LibTorch tasks).
  virtual std::string DescribeThreads() const { return ""; }
  // Whether Step runs the distributed step (engine/distributed.h) when options.distributed
  // has several ranks; a task that does not is refused then.
  virtual bool TrainsOnSeveralProcesses() const { return false; }
};

// For a task that reads privacy-relevant extra flags itself before RunTraining (word2vec's
// --algorithm): with --resume, `options` with the checkpoint's values of `privacy_flags`
// restored (and contradicting flags refused, engine/run_plan.h); otherwise `options`.
absl::StatusOr<TrainOptions> WithCheckpointFlags(const TrainOptions& options,
                                                 const std::vector<std::string>& privacy_flags);

// Runs `task` as configured by `options` (see the file comment). Errors: InvalidArgument /
// NotFound for bad input (one line, exit 2), Internal for I/O failures.
absl::Status RunTraining(const TrainOptions& options, TrainingTask& task);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_TRAINING_ENGINE_H_
