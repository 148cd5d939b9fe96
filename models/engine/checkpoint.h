// The files of one training run in --output_dir, and their crash-safety protocol.
//
//   ledger.jsonl     the privacy ledger (models/training_ledger.h); a step's entry is
//                    appended (write + fsync) BEFORE its update is applied;
//   metrics.jsonl    one JSON object per epoch;
//   checkpoint.json  next_step, ledger_steps, ledger_entries, the model name, the state
//                    files, and the privacy settings (engine/run_plan.h) restored on --resume;
//   state files      the task's (model.pt and optimizer.pt, or word2vec's model.bin), each
//                    holding the next step it was saved at.
//
// A checkpoint is written only at an epoch end, after the epoch's ledger entries: each state
// file goes to NAME.tmp (fsynced), then the renames NAME.tmp -> NAME, then checkpoint.json
// (tmp, fsync, rename) last, so the saved model never holds an update the ledger lacks.
// A fresh run refuses an --output_dir holding run files unless --overwrite is given, and with
// --overwrite removes checkpoint.json first, then the state files, and only then starts the
// new ledger: no earlier run's checkpoint can be resumed beside a new ledger (issue 21).
// --resume checks (engine/training_engine.cc) that ledger_steps >= next_step, that the ledger
// file holds at least ledger_entries entries, and that the state files' own step is covered:
// entries beyond the checkpoint are steps whose updates were lost in a crash; they stay in
// the ledger (over-counting is safe) and the run continues.
#ifndef DPKIT_MODELS_ENGINE_CHECKPOINT_H_
#define DPKIT_MODELS_ENGINE_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/models/engine/run_plan.h"

namespace dpkit::models {

inline constexpr char kLedgerFile[] = "ledger.jsonl";
inline constexpr char kMetricsFile[] = "metrics.jsonl";
inline constexpr char kCheckpointFile[] = "checkpoint.json";

struct Checkpoint {
  std::string model;
  int64_t next_step = 0;       // updates the state files hold
  int64_t ledger_steps = 0;    // step entries in the ledger when written (>= next_step)
  int64_t ledger_entries = 0;  // all entries then (steps and other events, e.g. DP-PCA)
  bool ledger = true;          // whether the run writes a ledger (private, Poisson)
  std::vector<std::string> state_files;
  PrivacySettings privacy;
};

// The one temporary ledger path of a run without --output_dir (epsilon is still computed
// from a file): $TMPDIR/dpkit-ledger-PID-MODEL.jsonl, removed at the end of the run.
std::string TemporaryLedgerPath(const std::string& model);

// Prepares `dir` for a fresh run whose task writes `state_files` (and `other_files`, e.g.
// DP-PCA's projection): InvalidArgument naming the first run file found unless `overwrite`;
// with `overwrite` removes checkpoint.json (and its .tmp), then the state and other files,
// then the ledger and metrics.
absl::Status PrepareFreshRun(const std::string& dir, bool overwrite,
                             const std::vector<std::string>& state_files,
                             const std::vector<std::string>& other_files);

// Reads and validates dir/checkpoint.json (one-line errors): NotFound when absent,
// InvalidArgument for a malformed file, another model's checkpoint, a ledger_steps below
// next_step, or a missing state file.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& dir, const std::string& model);

// Writes a checkpoint: write_state(suffix) writes every state file to dir/NAME + suffix;
// then each NAME.tmp is renamed over NAME and checkpoint.json is written atomically.
absl::Status SaveCheckpoint(const std::string& dir, const Checkpoint& checkpoint,
                            const std::function<absl::Status(const std::string& suffix)>& write_state);

// Fault injection for tests (engine_testing.h sets the hook): the engine calls this at each
// point of the protocol; without a hook it does nothing.
enum class FaultPoint {
  kLedgerAppended,     // a step's entry is durable, its update not yet applied
  kUpdateApplied,      // the step's update is applied (in memory)
  kStateWritten,       // the state files' .tmp copies are written
  kStateRenamed,       // the state files are renamed, checkpoint.json not yet
  kCheckpointWritten,  // checkpoint.json is renamed
};
void ReachFaultPoint(FaultPoint point, int64_t step);
namespace internal {
using FaultHook = std::function<void(FaultPoint, int64_t)>;
FaultHook& TrainingFaultHook();
}  // namespace internal

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_CHECKPOINT_H_
