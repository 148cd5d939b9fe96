#include "optim/clipping.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::optim {
namespace {

TEST(ClippingTest, ClipFactorScalesLongGradientsToTheClipNorm) {
  EXPECT_DOUBLE_EQ(ClipFactor(16.0, 2.0), 0.5);  // ||g|| = 4 -> 2/4
  EXPECT_DOUBLE_EQ(ClipFactor(1.0, 2.0), 1.0);   // short gradients unchanged
  EXPECT_DOUBLE_EQ(ClipFactor(0.0, 2.0), 1.0);   // zero gradient, no division by zero
  std::vector<double> sq = {9.0, 0.25}, f(2);
  ClipFactors(sq, 1.0, absl::MakeSpan(f));
  EXPECT_DOUBLE_EQ(f[0], 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(f[1], 1.0);
}

TEST(ClippingTest, PerLayerGroupsKeepTotalSensitivity) {
  auto groups = MakeClippingGroups(ClippingMode::kPerLayer, 1.5, 4);
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(groups->clip_norms.size(), 4u);
  EXPECT_NEAR(groups->TotalSensitivity(), 1.5, 1e-15);
  EXPECT_EQ(groups->group_of_layer[3], 3);
}

TEST(ClippingTest, FlatIsOneGroup) {
  auto groups = MakeClippingGroups(ClippingMode::kFlat, 1.0, 3);
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(groups->clip_norms, std::vector<double>{1.0});
  EXPECT_EQ(groups->group_of_layer, (std::vector<int>{0, 0, 0}));
}

TEST(ClippingTest, JointGroupsMustPartitionLayers) {
  auto ok = MakeClippingGroups(ClippingMode::kJoint, 0, 3, {{0, 2}, {1}}, {3.0, 4.0});
  ASSERT_TRUE(ok.ok());
  EXPECT_DOUBLE_EQ(ok->TotalSensitivity(), 5.0);
  EXPECT_EQ(ok->group_of_layer, (std::vector<int>{0, 1, 0}));
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 0, 3, {{0, 1}}, {1.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 0, 2, {{0, 1}, {1}}, {1.0, 1.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 0, 2, {{0, 5}}, {1.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 0, 1, {{0}}, {-1.0}).ok());
}

TEST(ClippingTest, RejectsNonPositiveClipNorm) {
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kFlat, 0.0, 1).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kFlat, NAN, 1).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kFlat, 1.0, 0).ok());
  EXPECT_FALSE(ParseClippingMode("both").ok());
  EXPECT_EQ(*ParseClippingMode("per_layer"), ClippingMode::kPerLayer);
}

}  // namespace
}  // namespace dpkit::optim
