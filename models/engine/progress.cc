#include "dpkit/models/engine/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dpkit::models {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::ceil(seconds));
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

std::string ProgressLine(const ProgressState& state, int bar_width) {
  std::string line;
  if (bar_width > 0) {
    const double done = state.total > 0 ? static_cast<double>(state.step) /
                                              static_cast<double>(state.total)
                                        : 1.0;
    const int filled = std::clamp(static_cast<int>(std::floor(done * bar_width)), 0, bar_width);
    line = absl::StrCat("[", std::string(filled, '#'), std::string(bar_width - filled, '.'),
                        "] ");
  }
  absl::StrAppendFormat(&line, "step %d/%d", state.step, state.total);
  if (state.loss) absl::StrAppendFormat(&line, "  loss %.4f", *state.loss);
  if (state.accuracy) absl::StrAppendFormat(&line, "  train acc %.2f%%", 100.0 * *state.accuracy);
  if (state.steps_per_second > 0 && state.examples_per_second > 0) {
    absl::StrAppendFormat(&line, "  %.0f ex/s (%.2f steps/s)", state.examples_per_second,
                          state.steps_per_second);
  } else if (state.steps_per_second > 0) {
    absl::StrAppendFormat(&line, "  %.2f steps/s", state.steps_per_second);
  }
  absl::StrAppend(&line, "  ETA ", FormatDuration(state.seconds_left));
  return line;
}

ProgressMeter::ProgressMeter(int64_t start_step, int64_t total_steps, bool terminal,
                             std::FILE* out, bool training_data_figures)
    : start_step_(start_step),
      total_(total_steps),
      terminal_(terminal),
      out_(out),
      training_data_figures_(training_data_figures),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressMeter::Update(int64_t steps_done, int64_t examples, double loss,
                           std::optional<double> accuracy, bool epoch_end) {
  examples_ += examples;
  const auto now = std::chrono::steady_clock::now();
  const bool due =
      terminal_ ? std::chrono::duration<double>(now - last_draw_).count() >= kRedrawSeconds
                : steps_done % kPlainEvery == 0;
  if (!due && !epoch_end) return;
  last_draw_ = now;
  ProgressState state;
  state.step = steps_done;
  state.total = total_;
  if (training_data_figures_) {
    state.loss = loss;
    state.accuracy = accuracy;
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int64_t timed = steps_done - start_step_;
  if (elapsed > 0 && timed > 0) {
    state.steps_per_second = static_cast<double>(timed) / elapsed;
    if (training_data_figures_) {
      state.examples_per_second = static_cast<double>(examples_) / elapsed;
    }
    state.seconds_left = static_cast<double>(total_ - steps_done) / state.steps_per_second;
  }
  if (terminal_) {
    // \r and erase-to-end-of-line redraw the line in place; the epoch report follows it.
    std::fprintf(out_, "\r%s\x1b[K%s", ProgressLine(state, kBarWidth).c_str(),
                 epoch_end ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", ProgressLine(state, 0).c_str());
  }
  std::fflush(out_);
}

}  // namespace dpkit::models
