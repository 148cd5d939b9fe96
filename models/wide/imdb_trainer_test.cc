#include "gtest/gtest.h"
#include "models/trainer_registry.h"

namespace dpkit::models {
namespace {

TEST(ImdbTrainerTest, IsRegisteredAndRunsEndToEndOnSmallAclImdbFolder) {
  const TrainerInfo* trainer = FindTrainer("imdb");
  ASSERT_NE(trainer, nullptr);
  TrainOptions o;
  o.data_dir = "models/wide/testdata/aclImdb";  // 80 train / 20 test reviews, same layout
  o.epochs = 2;
  o.batch_size = 16;
  EXPECT_TRUE(trainer->run(o).ok());
}

TEST(ImdbTrainerTest, MissingDataIsNotFound) {
  TrainOptions o;
  o.data_dir = "models/wide/testdata/no_such_folder";
  EXPECT_EQ(FindTrainer("imdb")->run(o).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dpkit::models
