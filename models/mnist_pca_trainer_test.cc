// `dpkit train mnist-pca` (Abadi et al. 2016, Sec. 5.1): the learning-rate decay of their
// Sec. 5.1 by hand, and a few steps of the trainer on synthetic MNIST-format files whose
// saved optimizer holds the schedule's rate of its last step.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/models/mnist_models.h"
#include "dpkit/models/trainer_registry.h"
#include "dpkit/tests/training/training_testing.h"
#include "nlohmann/json.hpp"

namespace dpkit::models {
namespace {

TEST(AbadiPcaLearningRateTest, LinearFromPointOneToPoint052OverTenEpochsThenConstant) {
  // 100 steps per epoch (MNIST's 60,000 / lot 600): step 0 is 0.1; after 5 epochs halfway,
  // (0.1 + 0.052) / 2 = 0.076; from epoch 10 on, 0.052.
  EXPECT_DOUBLE_EQ(AbadiPcaLearningRate(0, 100, 0.1), 0.1);
  EXPECT_NEAR(AbadiPcaLearningRate(500, 100, 0.1), 0.076, 1e-15);
  EXPECT_NEAR(AbadiPcaLearningRate(250, 100, 0.1), 0.1 - 0.048 / 4, 1e-15);
  EXPECT_NEAR(AbadiPcaLearningRate(1000, 100, 0.1), 0.052, 1e-15);
  EXPECT_NEAR(AbadiPcaLearningRate(7777, 100, 0.1), 0.052, 1e-15);
  EXPECT_NEAR(AbadiPcaLearningRate(500, 100, 0.2), 0.152, 1e-15);  // same shape, scaled
}

// The learning rate stored in a saved torch optimizer (param group 0's options).
double SavedLearningRate(const std::string& path) {
  torch::serialize::InputArchive archive, groups, group, options;
  archive.load_from(path);
  archive.read("param_groups", groups);  // torch/optim/serialize.h's layout
  groups.read("param_groups/0", group);
  group.read("options", options);
  c10::IValue lr;
  options.read("lr", lr);
  return lr.toDouble();
}

TEST(MnistPcaTrainerTest, FewStepsFollowTheSchedule) {
  const std::string data = training_testing::MakeMnistData("pca_schedule_data", 128, 20);
  TrainOptions o;
  o.model = "mnist-pca";
  o.data_dir = data;
  o.output_dir = training_testing::TempDir() + "/pca_schedule";
  o.overwrite = true;
  o.threads = 1;
  o.format = "json";
  o.test_subset = 20;
  o.batch_size = 32;  // q = 1/4: 4 steps per epoch
  o.epochs = 3;       // steps 0..11; the last one's rate is 0.1 (1 - 0.48 * 11/40)
  testing::internal::CaptureStdout();
  const absl::Status status = FindTrainer("mnist-pca")->run(o);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_NEAR(SavedLearningRate(o.output_dir + "/optimizer.pt"), 0.1 * (1 - 0.48 * 11 / 40.0),
              1e-12);
  const std::vector<nlohmann::json> ledger =
      training_testing::ReadJsonLines(o.output_dir + "/ledger.jsonl");
  ASSERT_EQ(ledger.size(), 13u);  // the DP-PCA event, then 12 steps
  EXPECT_EQ(ledger[0].at("type"), "event");
  // Resumed for 12 more epochs: the schedule goes on from step 12 and ends at 0.052.
  TrainOptions resume = o;
  resume.overwrite = false;
  resume.resume = true;
  resume.epochs = 15;
  testing::internal::CaptureStdout();
  const absl::Status resumed = FindTrainer("mnist-pca")->run(resume);
  testing::internal::GetCapturedStdout();
  ASSERT_TRUE(resumed.ok()) << resumed;
  EXPECT_NEAR(SavedLearningRate(o.output_dir + "/optimizer.pt"), 0.052, 1e-12);
}

}  // namespace
}  // namespace dpkit::models
