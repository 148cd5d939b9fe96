#include "dpkit/models/engine/progress.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace dpkit::models {
namespace {

TEST(FormatDurationTest, RoundsUpAndShowsHoursOnlyWhenNeeded) {
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(0.2), "0:01");
  EXPECT_EQ(FormatDuration(65), "1:05");
  EXPECT_EQ(FormatDuration(3599.5), "1:00:00");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(std::numeric_limits<double>::infinity()), "?");
}

TEST(ProgressLineTest, ShowsBarStepsThroughputAndEta) {
  ProgressState state;
  state.step = 50;
  state.total = 200;
  state.loss = 0.5;
  state.accuracy = 0.875;
  state.examples_per_second = 1280;
  state.steps_per_second = 5;
  state.seconds_left = 30;
  EXPECT_EQ(ProgressLine(state, 8),
            "[##......] step 50/200  loss 0.5000  train acc 87.50%  1280 ex/s (5.00 steps/s)"
            "  ETA 0:30");
  state.accuracy.reset();
  EXPECT_EQ(ProgressLine(state, 0),
            "step 50/200  loss 0.5000  1280 ex/s (5.00 steps/s)  ETA 0:30");
}

TEST(ProgressLineTest, UnknownRateShowsNoThroughput) {
  ProgressState state;
  state.step = 0;
  state.total = 10;
  state.loss = 0;
  EXPECT_EQ(ProgressLine(state, 4), "[....] step 0/10  loss 0.0000  ETA ?");
  state.step = 10;
  EXPECT_EQ(ProgressLine(state, 4).substr(0, 6), "[####]");
}

std::string Draw(bool terminal, int64_t start, int64_t total, int64_t epoch,
                 bool training_data_figures = true) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  {
    ProgressMeter meter(start, total, terminal, out, training_data_figures);
    for (int64_t s = start + 1; s <= total; ++s) meter.Update(s, 4, 1.0, 0.5, s % epoch == 0);
  }
  std::fclose(out);
  std::string text(buffer, size);
  free(buffer);
  return text;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ProgressMeterTest, PlainLinesEveryTwentyStepsAndAtEpochEnds) {
  const std::string text = Draw(false, 0, 45, 15);
  // Steps 15, 20, 30, 40 and 45: one line each, no carriage return or escape.
  EXPECT_EQ(Count(text, "\n"), 5) << text;
  EXPECT_EQ(Count(text, "\r"), 0);
  EXPECT_EQ(Count(text, "\x1b"), 0);
  EXPECT_NE(text.find("step 45/45"), std::string::npos) << text;
  EXPECT_NE(text.find("ex/s"), std::string::npos) << text;
}

TEST(ProgressMeterTest, WithoutTrainingDataFiguresShowsNoLossAccuracyOrExamples) {
  // --train_metrics=private or none: nothing computed from the training data without noise
  // (the loss, the accuracy, the realised batch sizes behind ex/s) reaches the output.
  const std::string text = Draw(false, 0, 45, 15, /*training_data_figures=*/false);
  EXPECT_EQ(Count(text, "\n"), 5) << text;
  EXPECT_EQ(Count(text, "loss"), 0) << text;
  EXPECT_EQ(Count(text, "acc"), 0) << text;
  EXPECT_EQ(Count(text, "ex/s"), 0) << text;
  EXPECT_NE(text.find("steps/s"), std::string::npos) << text;
}

TEST(ProgressMeterTest, TerminalRedrawsInPlaceAndEndsEachEpochWithANewline) {
  const std::string text = Draw(true, 5, 45, 15);
  // Fast steps: the redraws are rate-limited, the 3 epoch ends are always drawn.
  EXPECT_EQ(Count(text, "\n"), 3) << text;
  EXPECT_GE(Count(text, "\r"), 3);
  EXPECT_NE(text.find("\r[########################] step 45/45"), std::string::npos) << text;
}

}  // namespace
}  // namespace dpkit::models
