// The per-epoch report of the training engine: one JSON object per epoch (printed with
// --format=json, appended to metrics.jsonl) and one text line otherwise:
//   {"epoch" (an integer, the E of EpochLabel), "epochs_completed" (steps / steps per
//    epoch, a fraction when --max_steps or the schedule cuts an epoch short), "step",
//    "total_steps", "train_loss",
//    [task metrics, e.g. "train_accuracy", "test_accuracy"],
//    "epsilon" (the object of `dpkit epsilon`, computed FROM THE LEDGER FILE; null when no
//    ledger is written), "delta", "noise_multiplier", "sampling_rate", "sampler",
//    "microbatch_size", "seconds", ["epsilon_note" when epsilon is null]}
// The text line starts with EpochLabel (whole epochs and steps, never a fraction such as
// "14.96"); its headline epsilon is the smallest certified upper bound (PLD or RDP),
// rounded up at the printed precision (accounting/report_rounding.h), printed first.
#ifndef DPKIT_MODELS_ENGINE_EPOCH_REPORT_H_
#define DPKIT_MODELS_ENGINE_EPOCH_REPORT_H_

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "dpkit/models/engine/run_plan.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {

// "epoch E/N (step S/T)": E = ceil(S / steps_per_epoch), N = ceil(T / steps_per_epoch),
// so a last epoch cut short by the schedule or --max_steps is still counted whole, and the
// steps say where the run is exactly.
std::string EpochLabel(int64_t step, int64_t steps_per_epoch, int64_t total_steps);

class EpochReport {
 public:
  // `ledger_path` empty: no ledger (epsilon null with a note); `metrics_path` empty: no file.
  EpochReport(const RunPlan& plan, bool json, std::string ledger_path,
              const std::string& metrics_path);

  // The run's one-line header (text format only).
  void PrintHeader(const std::string& threads, const std::string& output) const;

  // Reports the epoch ending after `step` steps: `metrics` are the task's (train loss and
  // accuracy, test metrics), `text` their short description.
  absl::Status Report(int64_t step, const nlohmann::json& metrics, const std::string& text,
                      double seconds);

 private:
  const RunPlan& plan_;
  bool json_;
  std::string ledger_path_;
  std::ofstream metrics_;
};

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_EPOCH_REPORT_H_
