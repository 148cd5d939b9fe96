#include "models/engine/epoch_report.h"

#include "gtest/gtest.h"

namespace dpkit::models {
namespace {

TEST(EpochLabelTest, CountsWholeEpochsAndSteps) {
  // MNIST row 1: 235 steps per epoch, 15 epochs.
  EXPECT_EQ(EpochLabel(235, 235, 3525), "epoch 1/15 (step 235/3525)");
  EXPECT_EQ(EpochLabel(3525, 235, 3525), "epoch 15/15 (step 3525/3525)");
  // A last epoch cut short (the fraction 14.96 of before) is still epoch 15 of 15.
  EXPECT_EQ(EpochLabel(3516, 235, 3516), "epoch 15/15 (step 3516/3516)");
  // --max_steps stopping in the first epoch.
  EXPECT_EQ(EpochLabel(6, 8, 6), "epoch 1/1 (step 6/6)");
}

}  // namespace
}  // namespace dpkit::models
