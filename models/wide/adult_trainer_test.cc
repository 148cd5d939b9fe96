#include "gtest/gtest.h"
#include "models/trainer_registry.h"

namespace dpkit::models {
namespace {

TEST(AdultTrainerTest, IsRegisteredAndRunsEndToEndOnSmallA9aFiles) {
  const TrainerInfo* trainer = FindTrainer("adult");
  ASSERT_NE(trainer, nullptr);
  TrainOptions o;
  o.model = "adult";
  o.data_dir = "models/wide/testdata/adult";  // 600 / 200 lines in a9a format
  o.epochs = 2;
  o.batch_size = 64;
  EXPECT_TRUE(trainer->run(o).ok());
}

TEST(AdultTrainerTest, MissingDataIsNotFound) {
  TrainOptions o;
  o.data_dir = "models/wide/testdata/no_such_folder";
  EXPECT_EQ(FindTrainer("adult")->run(o).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dpkit::models
