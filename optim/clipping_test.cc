#include "dpkit/optim/clipping.h"

#include <cmath>
#include <cstdint>
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
  auto ok = MakeClippingGroups(ClippingMode::kJoint, 2.0, 3, {{0, 2}, {1}}, {3.0, 4.0});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->num_groups(), 2);
  EXPECT_DOUBLE_EQ(ok->TotalSensitivity(), 2.0);  // C, in rescaled units
  EXPECT_EQ(ok->group_of_layer, (std::vector<int>{0, 1, 0}));
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 1, 3, {{0, 1}}, {1.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 1, 2, {{0, 1}, {1}}, {1.0, 1.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 1, 2, {{0, 5}}, {1.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 1, 1, {{0}}, {-1.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 1, 1, {{0}}, {1.0, 2.0}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kJoint, 0, 1, {{0}}, {1.0}).ok());
}

TEST(ClippingTest, JointClippingBoundsTheRescaledNormWithOneFactor) {
  // Record with group norms 3 and 4, scales 1 and 2: rescaled norm sqrt(9 + 16/4) =
  // sqrt(13); clip C = 1 gives factor 1/sqrt(13) for both groups, and the rescaled
  // clipped record has norm exactly C.
  auto groups = MakeClippingGroups(ClippingMode::kJoint, 1.0, 2, {{0}, {1}}, {1.0, 2.0});
  ASSERT_TRUE(groups.ok());
  std::vector<double> sq = {9.0, 16.0}, f(2);
  RecordClipFactors(*groups, sq, absl::MakeSpan(f));
  EXPECT_DOUBLE_EQ(f[0], 1.0 / std::sqrt(13.0));
  EXPECT_DOUBLE_EQ(f[1], f[0]);
  double rescaled = f[0] * f[0] * 9.0 / 1.0 + f[1] * f[1] * 16.0 / 4.0;
  EXPECT_NEAR(std::sqrt(rescaled), 1.0, 1e-15);
  // Per-layer: each group on its own.
  auto per_layer = MakeClippingGroups(ClippingMode::kPerLayer, std::sqrt(2.0), 2);
  RecordClipFactors(*per_layer, sq, absl::MakeSpan(f));
  EXPECT_DOUBLE_EQ(f[0], 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(f[1], 1.0 / 4.0);
}

// McMahan et al. 2018, eq. (1), written out here (not taken from //accounting):
// z = (sum_g (Delta_g / s_g)^2)^(-1/2).
double Collapsed(const std::vector<accounting::SumQueryRecord>& queries) {
  double sum = 0;
  for (const auto& q : queries) sum += std::pow(q.clip_norm / q.noise_stddev, 2);
  return 1.0 / std::sqrt(sum);
}

TEST(ClippingTest, LedgerQueriesCollapseToTheNoiseMultiplierInEveryMode) {
  const double sigma = 1.3;
  auto flat = MakeClippingGroups(ClippingMode::kFlat, 1.5, 3);
  auto per_layer = MakeClippingGroups(ClippingMode::kPerLayer, 1.5, 3);
  auto joint = MakeClippingGroups(ClippingMode::kJoint, 1.5, 3, {{0, 1}, {2}}, {1.0, 0.25});
  for (const auto* groups : {&*flat, &*per_layer, &*joint}) {
    for (int64_t k : {1, 4}) {
      EXPECT_NEAR(Collapsed(MakeNoisePlan(*groups, sigma, k).records), sigma, 1e-12);
    }
  }
}

// Dimensionality-adjusted per-layer clipping (McMahan et al. 2018, Sec. 3): C_j = C
// sqrt(d_j / D). Checked independently: the clip norms' squares sum to C^2 and are
// proportional to d_j; records whose layers are each far longer than their share are
// clipped to a concatenation of norm exactly C (the sensitivity is reached, not only
// bounded); random records never exceed C; the noise is sigma C on every coordinate and
// the ledger's collapsed noise multiplier is sigma (unchanged from flat clipping).
TEST(ClippingTest, DimensionAdjustedPerLayerClippingKeepsTotalSensitivityC) {
  const double c = 2.5, sigma = 1.1;
  const std::vector<int64_t> dims = {784 * 100 + 100, 100 * 10 + 10, 7};
  auto groups = MakeClippingGroups(ClippingMode::kPerLayerDim, c, 3, {}, {}, dims);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->num_groups(), 3);
  EXPECT_NEAR(groups->TotalSensitivity(), c, 1e-14);
  const double total = 78400 + 100 + 1010 + 7;
  double squares = 0;
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(groups->clip_norms[j] * groups->clip_norms[j] / (c * c),
                static_cast<double>(dims[j]) / total, 1e-14);
    squares += groups->clip_norms[j] * groups->clip_norms[j];
  }
  EXPECT_NEAR(squares, c * c, 1e-13);
  // Far too long in every layer: each layer is clipped to its share, the whole to C.
  std::vector<double> sq = {1e6, 4e4, 9e2}, f(3);
  RecordClipFactors(*groups, sq, absl::MakeSpan(f));
  double clipped = 0;
  for (int j = 0; j < 3; ++j) clipped += f[j] * f[j] * sq[j];
  EXPECT_NEAR(std::sqrt(clipped), c, 1e-12);
  // Random records: never above C.
  uint64_t state = 12345;
  for (int trial = 0; trial < 1000; ++trial) {
    for (double& v : sq) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      v = std::ldexp(static_cast<double>(state >> 11), -53) * 10.0;
    }
    RecordClipFactors(*groups, sq, absl::MakeSpan(f));
    double norm = 0;
    for (int j = 0; j < 3; ++j) norm += f[j] * f[j] * sq[j];
    EXPECT_LE(std::sqrt(norm), c * (1 + 1e-15));
  }
  const NoisePlan plan = MakeNoisePlan(*groups, sigma, 1);
  for (double s : plan.group_noise_stddevs) EXPECT_DOUBLE_EQ(s, sigma * c);
  EXPECT_NEAR(Collapsed(plan.records), sigma, 1e-12);
  EXPECT_EQ(*ParseClippingMode("per_layer_dim"), ClippingMode::kPerLayerDim);
  // One dimension per layer, each >= 1.
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kPerLayerDim, c, 3, {}, {}, {1, 2}).ok());
  EXPECT_FALSE(MakeClippingGroups(ClippingMode::kPerLayerDim, c, 2, {}, {}, {1, 0}).ok());
}

TEST(ClippingTest, MicrobatchesDoubleTheSensitivityAndTheNoise) {
  auto flat = MakeClippingGroups(ClippingMode::kFlat, 1.5, 2);
  auto joint = MakeClippingGroups(ClippingMode::kJoint, 1.5, 2, {{0}, {1}}, {1.0, 0.5});
  // Single examples: Delta = C. Microbatches: a record moves from clip(a) to clip(b),
  // both of norm <= C, so Delta = 2C (see clipping.h).
  EXPECT_EQ(SensitivityMultiplier(1), 1.0);
  EXPECT_EQ(SensitivityMultiplier(2), 2.0);
  EXPECT_DOUBLE_EQ(MakeNoisePlan(*flat, 1.3, 1).records[0].clip_norm, 1.5);
  EXPECT_DOUBLE_EQ(MakeNoisePlan(*flat, 1.3, 3).records[0].clip_norm, 3.0);
  EXPECT_DOUBLE_EQ(MakeNoisePlan(*flat, 1.3, 1).group_noise_stddevs[0], 1.3 * 1.5);
  EXPECT_DOUBLE_EQ(MakeNoisePlan(*flat, 1.3, 3).group_noise_stddevs[0], 1.3 * 3.0);
  // Joint: noise sigma Delta s_g per group.
  std::vector<double> joint_noise = MakeNoisePlan(*joint, 1.3, 2).group_noise_stddevs;
  ASSERT_EQ(joint_noise.size(), 2u);
  EXPECT_DOUBLE_EQ(joint_noise[0], 1.3 * 3.0 * 1.0);
  EXPECT_DOUBLE_EQ(joint_noise[1], 1.3 * 3.0 * 0.5);
  const NoisePlan joint_plan = MakeNoisePlan(*joint, 1.3, 2);
  ASSERT_EQ(joint_plan.records.size(), 1u);
  EXPECT_DOUBLE_EQ(joint_plan.records[0].clip_norm, 3.0);
  EXPECT_DOUBLE_EQ(joint_plan.records[0].noise_stddev, 1.3 * 3.0);
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
