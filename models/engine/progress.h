// The step progress of a training run, on stderr. On a terminal: one line redrawn in
// place (at most every kRedrawSeconds, and at each epoch's end), with a bar, steps/total,
// the epoch's running loss (and accuracy for classifiers), the throughput in examples and
// steps per second, and the estimated time left (loss, accuracy and examples only where the
// run prints non-private training figures, --train_metrics=nonprivate). When stderr is not a terminal (a log
// file, a pipe, a test): the same fields as plain lines, every kPlainEvery steps and at
// each epoch's end. JSON runs (--format=json) print no progress.
#ifndef DPKIT_MODELS_ENGINE_PROGRESS_H_
#define DPKIT_MODELS_ENGINE_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace dpkit::models {

// What one progress line shows.
struct ProgressState {
  int64_t step = 0;   // steps done (1-based count)
  int64_t total = 1;  // the run's total steps
  std::optional<double> loss;      // the epoch's running mean loss (none: not shown)
  std::optional<double> accuracy;  // the epoch's running training accuracy in [0, 1]
  double examples_per_second = 0;  // over the steps of this process (0: not shown)
  double steps_per_second = 0;
  double seconds_left = -1;  // < 0: unknown (no step timed yet)
};

// "1:05" for 65 s, "1:02:03" for 3723 s, "?" for a negative or non-finite value.
std::string FormatDuration(double seconds);

// One progress line, without a line end: the bar (`bar_width` cells, none when 0), then
// "step S/T", the loss, the accuracy, the throughput and the ETA.
std::string ProgressLine(const ProgressState& state, int bar_width);

class ProgressMeter {
 public:
  static constexpr int64_t kPlainEvery = 20;
  static constexpr double kRedrawSeconds = 0.2;
  static constexpr int kBarWidth = 24;

  // The run continues at `start_step` of `total_steps`; `terminal` selects the in-place
  // line (normally isatty(fileno(out))). `training_data_figures` false (--train_metrics=
  // private or none): the line shows neither the training loss and accuracy nor the
  // examples per second (the realised Poisson batch sizes), none of which the ledger covers.
  ProgressMeter(int64_t start_step, int64_t total_steps, bool terminal, std::FILE* out,
                bool training_data_figures = true);

  // After the step that brings the run to `steps_done` steps, with `examples` examples
  // in that step and the epoch's running loss and accuracy.
  void Update(int64_t steps_done, int64_t examples, double loss, std::optional<double> accuracy,
              bool epoch_end);

 private:
  int64_t start_step_;
  int64_t total_;
  bool terminal_;
  std::FILE* out_;
  bool training_data_figures_;
  int64_t examples_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_ENGINE_PROGRESS_H_
