#include "dpkit/optim/torch/dp_optimizer.h"

#include <cmath>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;

struct Net : torch::nn::Module {
  DpLinear fc1{nullptr}, fc2{nullptr};
  Net(int64_t in, int64_t hidden, int64_t out) {
    fc1 = register_module("fc1", DpLinear(in, hidden));
    fc2 = register_module("fc2", DpLinear(hidden, out));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::Tensor reference(const torch::Tensor& x) {
    return F::linear(torch::tanh(F::linear(x, fc1->weight, fc1->bias)), fc2->weight, fc2->bias);
  }
};

torch::Tensor Losses(const torch::Tensor& logits, const torch::Tensor& labels) {
  return F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kNone));
}

std::unique_ptr<DpOptimizer> MakeDp(Net& net, const DpOptimizerOptions& options, double lr) {
  auto sgd = MakeTorchOptimizer("sgd", net.parameters(), lr);
  EXPECT_TRUE(sgd.ok());
  auto dp = DpOptimizer::Create(net, *std::move(sgd), options,
                                std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(1));
  EXPECT_TRUE(dp.ok()) << dp.status();
  return *std::move(dp);
}

// Independent computation: batch-size-1 autograd, clip each example per group by hand.
std::vector<torch::Tensor> ExpectedUpdate(Net& net, const torch::Tensor& x, const torch::Tensor& y,
                                          const std::vector<std::vector<int>>& param_groups,
                                          const std::vector<double>& clip, double denominator) {
  std::vector<torch::Tensor> params = net.parameters();
  std::vector<torch::Tensor> total;
  for (auto& p : params) total.push_back(torch::zeros_like(p));
  for (int64_t i = 0; i < x.size(0); ++i) {
    auto grads = torch::autograd::grad(
        {Losses(net.reference(x.narrow(0, i, 1)), y.narrow(0, i, 1)).sum()}, params);
    for (size_t g = 0; g < param_groups.size(); ++g) {
      double sq = 0;
      for (int p : param_groups[g]) sq += grads[p].pow(2).sum().item<double>();
      double factor = std::min(1.0, clip[g] / std::sqrt(sq));
      for (int p : param_groups[g]) total[p] += grads[p] * factor;
    }
  }
  for (auto& t : total) t /= -denominator;  // SGD with lr 1 moves by -gradient
  return total;
}

void ExpectUpdate(Net& net, const std::vector<torch::Tensor>& before,
                  const std::vector<torch::Tensor>& expected) {
  std::vector<torch::Tensor> after = net.parameters();
  for (size_t p = 0; p < after.size(); ++p) {
    // float64 throughout: 1e-10 absolute is ~1e4 ulps of these O(1) values.
    EXPECT_LT((after[p] - before[p] - expected[p]).abs().max().item<double>(), 1e-10) << p;
  }
}

std::vector<torch::Tensor> Snapshot(Net& net) {
  std::vector<torch::Tensor> out;
  for (auto& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(DpOptimizerTest, FlatClippingAveragesClippedExamplesOverExpectedBatchSize) {
  torch::manual_seed(1);
  Net net(5, 4, 3);
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 0;
  options.clip_norm = 0.3;  // below typical norms here, so clipping is active
  options.sampling_rate = 0.5;
  options.expected_batch_size = 10;
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({8, 5}, torch::kFloat64) * 3;
  torch::Tensor y = torch::randint(0, 3, {8}, torch::kLong);
  auto expected = ExpectedUpdate(net, x, y, {{0, 1, 2, 3}}, {0.3}, 10);
  auto before = Snapshot(net);
  Losses(net.forward(x), y).sum().backward();
  ASSERT_EQ(*dp->AccumulatePhysicalBatch(), 8);
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  ExpectUpdate(net, before, expected);
  EXPECT_EQ(record->batch_examples, 8);
  ASSERT_EQ(record->sampling.queries.size(), 1u);
  EXPECT_EQ(record->sampling.queries[0].clip_norm, 0.3);
  EXPECT_EQ(record->sampling.sampling_rate, 0.5);
  int clipped = 0;
  for (double n : dp->last_norms()) clipped += n > 0.3;
  EXPECT_GT(clipped, 0);  // the test exercises clipping
}

// The listener (the engine's ledger append) sees the step's record before the update is
// applied, and an error from it leaves the parameters untouched.
TEST(DpOptimizerTest, ListenerHearsTheRecordBeforeTheUpdateAndCanVetoIt) {
  torch::manual_seed(7);
  Net net(5, 4, 3);
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 1.3;
  options.clip_norm = 0.5;
  options.sampling_rate = 0.25;
  options.expected_batch_size = 8;
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({8, 5}, torch::kFloat64);
  torch::Tensor y = torch::randint(0, 3, {8}, torch::kLong);
  const auto before = Snapshot(net);
  int heard = 0;
  double changed_when_heard = -1;
  dp->SetStepListener([&](const accounting::SamplingRecord& record) {
    ++heard;
    EXPECT_EQ(record.step, 41);
    EXPECT_EQ(record.sampling_rate, 0.25);
    EXPECT_EQ(record.queries.size(), 1u);
    changed_when_heard = 0;
    for (size_t p = 0; p < before.size(); ++p) {
      changed_when_heard += (net.parameters()[p] - before[p]).abs().sum().item<double>();
    }
    return heard == 1 ? absl::InternalError("disk full") : absl::OkStatus();
  });
  Losses(net.forward(x), y).sum().backward();
  ASSERT_TRUE(dp->AccumulatePhysicalBatch().ok());
  const auto vetoed = dp->Step(41);
  EXPECT_EQ(vetoed.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(changed_when_heard, 0.0);
  for (size_t p = 0; p < before.size(); ++p) {
    EXPECT_TRUE(net.parameters()[p].equal(before[p])) << p;
    EXPECT_FALSE(net.parameters()[p].grad().defined()) << p;
  }
  Losses(net.forward(x), y).sum().backward();
  ASSERT_TRUE(dp->AccumulatePhysicalBatch().ok());
  const auto applied = dp->Step(41);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(heard, 2);
  EXPECT_EQ(changed_when_heard, 0.0);  // heard before the update
  EXPECT_DOUBLE_EQ(applied->sampling.queries[0].noise_stddev, 1.3 * 0.5);
  EXPECT_FALSE(net.parameters()[0].equal(before[0]));
}

TEST(DpOptimizerTest, PerLayerClippingClipsEachLayerToItsShare) {
  torch::manual_seed(2);
  Net net(5, 4, 3);
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 0;
  options.clip_norm = 0.4;
  options.clipping = ClippingMode::kPerLayer;
  options.expected_batch_size = 6;
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({6, 5}, torch::kFloat64) * 3;
  torch::Tensor y = torch::randint(0, 3, {6}, torch::kLong);
  double share = 0.4 / std::sqrt(2.0);
  auto expected = ExpectedUpdate(net, x, y, {{0, 1}, {2, 3}}, {share, share}, 6);
  auto before = Snapshot(net);
  Losses(net.forward(x), y).sum().backward();
  ASSERT_TRUE(dp->AccumulatePhysicalBatch().ok());
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  ExpectUpdate(net, before, expected);
  ASSERT_EQ(record->sampling.queries.size(), 2u);
  EXPECT_NEAR(record->sampling.queries[1].clip_norm, share, 1e-15);
}

TEST(DpOptimizerTest, PhysicalBatchesGiveTheSameStepAsOneBatch) {
  torch::manual_seed(3);
  Net net(5, 4, 3);
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 0;
  options.clip_norm = 0.5;
  options.expected_batch_size = 9;
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({9, 5}, torch::kFloat64) * 3;
  torch::Tensor y = torch::randint(0, 3, {9}, torch::kLong);
  auto expected = ExpectedUpdate(net, x, y, {{0, 1, 2, 3}}, {0.5}, 9);
  auto before = Snapshot(net);
  for (auto [start, size] : {std::pair<int64_t, int64_t>{0, 4}, {4, 5}}) {
    Losses(net.forward(x.narrow(0, start, size)), y.narrow(0, start, size)).sum().backward();
    ASSERT_EQ(*dp->AccumulatePhysicalBatch(), size);
  }
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->batch_examples, 9);
  ExpectUpdate(net, before, expected);
}

TEST(DpOptimizerTest, EmptyBatchStepIsNoiseWithStddevSigmaCOverBatch) {
  // 200 * 100 + 100 + ... coordinates: the sample standard deviation of n ~ 2e4 normals
  // has relative sd 1/sqrt(2n) ~ 0.5%; a 5% band is > 9 sd (false failure < 1e-18).
  Net net(200, 100, 10);
  DpOptimizerOptions options;
  options.noise_multiplier = 1.3;
  options.clip_norm = 2.0;
  options.expected_batch_size = 4;
  auto dp = MakeDp(net, options, 1.0);
  auto before = Snapshot(net);
  auto record = dp->Step();  // nothing accumulated: an empty Poisson batch
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->batch_examples, 0);
  EXPECT_DOUBLE_EQ(record->sampling.queries[0].noise_stddev, 2.6);
  std::vector<torch::Tensor> diffs;
  auto after = net.parameters();
  for (size_t p = 0; p < after.size(); ++p) diffs.push_back((after[p] - before[p]).flatten());
  torch::Tensor all = torch::cat(diffs).to(torch::kFloat64);
  double sd = all.std().item<double>();
  EXPECT_NEAR(sd, 2.6 / 4, 0.05 * 2.6 / 4);
  EXPECT_LT(std::abs(all.mean().item<double>()), 5 * (2.6 / 4) / std::sqrt(all.numel()));
}

// Independent computation for microbatches: batch-size-1 autograd gradients, averaged
// over each microbatch's examples, the average clipped to C as a whole (flat), summed.
std::vector<torch::Tensor> ExpectedMicrobatchUpdate(Net& net, const torch::Tensor& x,
                                                    const torch::Tensor& y,
                                                    const std::vector<std::vector<int64_t>>& members,
                                                    double clip, double denominator) {
  std::vector<torch::Tensor> params = net.parameters();
  std::vector<torch::Tensor> total;
  for (auto& p : params) total.push_back(torch::zeros_like(p));
  for (const auto& microbatch : members) {
    std::vector<torch::Tensor> mean;
    for (auto& p : params) mean.push_back(torch::zeros_like(p));
    for (int64_t i : microbatch) {
      auto grads = torch::autograd::grad(
          {Losses(net.reference(x.narrow(0, i, 1)), y.narrow(0, i, 1)).sum()}, params);
      for (size_t p = 0; p < params.size(); ++p) mean[p] += grads[p] / double(microbatch.size());
    }
    double sq = 0;
    for (auto& m : mean) sq += m.pow(2).sum().item<double>();
    double factor = std::min(1.0, clip / std::sqrt(sq));
    for (size_t p = 0; p < params.size(); ++p) total[p] += mean[p] * factor;
  }
  for (auto& t : total) t /= -denominator;
  return total;
}

TEST(DpOptimizerTest, MicrobatchRecordIsTheClippedAverageOfItsExamples) {
  torch::manual_seed(4);
  Net net(5, 4, 3);
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 0;
  options.clip_norm = 0.3;
  options.expected_batch_size = 8;
  options.microbatch_size = 3;  // M = round(8 / 3) = 3 records expected
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({8, 5}, torch::kFloat64) * 3;
  torch::Tensor y = torch::randint(0, 3, {8}, torch::kLong);
  // Microbatches {0,1,2} {3,4} | {5,6,7}, the bar separating two physical batches.
  auto expected = ExpectedMicrobatchUpdate(net, x, y, {{0, 1, 2}, {3, 4}, {5, 6, 7}}, 0.3, 3);
  auto before = Snapshot(net);
  Losses(net.forward(x.narrow(0, 0, 5)), y.narrow(0, 0, 5)).sum().backward();
  std::vector<int64_t> first = {3, 2}, second = {3};
  ASSERT_EQ(*dp->AccumulatePhysicalBatch(first), 5);
  int clipped = 0;
  for (double n : dp->last_norms()) clipped += n > 0.3;
  Losses(net.forward(x.narrow(0, 5, 3)), y.narrow(0, 5, 3)).sum().backward();
  ASSERT_EQ(*dp->AccumulatePhysicalBatch(second), 3);
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  ExpectUpdate(net, before, expected);
  EXPECT_EQ(record->batch_examples, 8);
  EXPECT_EQ(record->records, 3);
  EXPECT_GT(clipped, 0);  // the test exercises clipping
  // Sensitivity 2C with microbatches (optim/clipping.h).
  ASSERT_EQ(record->sampling.queries.size(), 1u);
  EXPECT_DOUBLE_EQ(record->sampling.queries[0].clip_norm, 0.6);
}

// User-level DP (McMahan et al. 2018, Alg. 1): a record is one user's examples, their mean
// gradient clipped to C; the sum is divided by the expected number of users, and the
// sensitivity is C (adding a user adds one record), not 2C as for microbatches.
TEST(DpOptimizerTest, UnitRecordIsTheUsersClippedMeanWithSensitivityC) {
  torch::manual_seed(14);
  Net net(5, 4, 3);
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 0;
  options.clip_norm = 0.2;
  options.expected_batch_size = 2.5;  // expected users per step
  options.unit_records = true;
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({9, 5}, torch::kFloat64) * 3;
  torch::Tensor y = torch::randint(0, 3, {9}, torch::kLong);
  // Users {0,1,2,3} {4} {5,6,7,8}.
  auto expected = ExpectedMicrobatchUpdate(net, x, y, {{0, 1, 2, 3}, {4}, {5, 6, 7, 8}}, 0.2, 2.5);
  auto before = Snapshot(net);
  Losses(net.forward(x), y).sum().backward();
  std::vector<int64_t> users = {4, 1, 4};
  ASSERT_EQ(*dp->AccumulatePhysicalBatch(users), 9);
  int clipped = 0;
  for (double n : dp->last_norms()) clipped += n > 0.2;
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  ExpectUpdate(net, before, expected);
  EXPECT_EQ(record->records, 3);
  EXPECT_GT(clipped, 0);  // the test exercises the per-user clipping
  ASSERT_EQ(record->sampling.queries.size(), 1u);
  EXPECT_DOUBLE_EQ(record->sampling.queries[0].clip_norm, 0.2);
  // Unit records need microbatch_size 1.
  options.microbatch_size = 2;
  auto sgd = MakeTorchOptimizer("sgd", net.parameters(), 1.0);
  EXPECT_FALSE(DpOptimizer::Create(net, *std::move(sgd), options,
                                   std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(1))
                   .ok());
}

// --clipping=per_layer_dim: the optimizer passes each layer's parameter count, so
// C_j = C sqrt(d_j / D) (optim/clipping.h) with the model's real d_j; total sensitivity C.
TEST(DpOptimizerTest, DimensionAdjustedClippingUsesTheLayersParameterCounts) {
  torch::manual_seed(15);
  Net net(5, 4, 3);  // layers: 5*4+4 = 24 and 4*3+3 = 15 parameters
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 0;
  options.clip_norm = 0.4;
  options.clipping = ClippingMode::kPerLayerDim;
  options.expected_batch_size = 6;
  auto dp = MakeDp(net, options, 1.0);
  const ClippingGroups& groups = dp->groups();
  const double c1 = 0.4 * std::sqrt(24.0 / 39.0), c2 = 0.4 * std::sqrt(15.0 / 39.0);
  ASSERT_EQ(groups.clip_norms.size(), 2u);
  EXPECT_NEAR(groups.clip_norms[0], c1, 1e-15);
  EXPECT_NEAR(groups.clip_norms[1], c2, 1e-15);
  EXPECT_NEAR(groups.TotalSensitivity(), 0.4, 1e-15);
  // The update: each example's layers clipped by hand to c1 and c2.
  torch::Tensor x = torch::randn({6, 5}, torch::kFloat64) * 3;
  torch::Tensor y = torch::randint(0, 3, {6}, torch::kLong);
  auto expected = ExpectedUpdate(net, x, y, {{0, 1}, {2, 3}}, {c1, c2}, 6);
  auto before = Snapshot(net);
  Losses(net.forward(x), y).sum().backward();
  ASSERT_TRUE(dp->AccumulatePhysicalBatch().ok());
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  ExpectUpdate(net, before, expected);
  ASSERT_EQ(record->sampling.queries.size(), 2u);
  EXPECT_NEAR(record->sampling.queries[0].clip_norm, c1, 1e-15);
}

TEST(DpOptimizerTest, MicrobatchSizesMustMatchTheBatch) {
  torch::manual_seed(5);
  Net net(5, 4, 3);
  DpOptimizerOptions options;
  options.microbatch_size = 2;
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({4, 5});
  torch::Tensor y = torch::randint(0, 3, {4}, torch::kLong);
  Losses(net.forward(x), y).sum().backward();
  std::vector<int64_t> wrong = {2, 1}, zero = {4, 0};
  EXPECT_FALSE(dp->AccumulatePhysicalBatch(wrong).ok());
  EXPECT_FALSE(dp->AccumulatePhysicalBatch(zero).ok());
  DpOptimizerOptions single;
  auto plain = MakeDp(net, single, 1.0);
  Losses(net.forward(x), y).sum().backward();
  std::vector<int64_t> sizes = {2, 2};
  EXPECT_FALSE(plain->AccumulatePhysicalBatch(sizes).ok());
  options.microbatch_size = 0;
  auto sgd = MakeTorchOptimizer("sgd", net.parameters(), 1.0);
  EXPECT_FALSE(DpOptimizer::Create(net, *std::move(sgd), options,
                                   std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(1))
                   .ok());
}

TEST(DpOptimizerTest, MicrobatchNoiseIsTwoSigmaCOverTheMicrobatchCount) {
  // Sensitivity 2C, noise sd 2 sigma C = 5.2, averaged over M = round(8 / 2) = 4 slots:
  // sd 1.3 per coordinate. ~2e4 coordinates: relative sd of the sample sd 0.5%, band 5%.
  Net net(200, 100, 10);
  DpOptimizerOptions options;
  options.noise_multiplier = 1.3;
  options.clip_norm = 2.0;
  options.expected_batch_size = 8;
  options.microbatch_size = 2;
  auto dp = MakeDp(net, options, 1.0);
  auto before = Snapshot(net);
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  EXPECT_DOUBLE_EQ(record->sampling.queries[0].clip_norm, 4.0);
  EXPECT_DOUBLE_EQ(record->sampling.queries[0].noise_stddev, 5.2);
  std::vector<torch::Tensor> diffs;
  auto after = net.parameters();
  for (size_t p = 0; p < after.size(); ++p) diffs.push_back((after[p] - before[p]).flatten());
  EXPECT_NEAR(torch::cat(diffs).to(torch::kFloat64).std().item<double>(), 1.3, 0.05 * 1.3);
}

TEST(DpOptimizerTest, JointClippingClipsTheRescaledRecordWithOneFactor) {
  torch::manual_seed(6);
  Net net(5, 4, 3);
  net.to(torch::kFloat64);
  DpOptimizerOptions options;
  options.noise_multiplier = 0;
  options.clip_norm = 0.5;
  options.clipping = ClippingMode::kJoint;
  options.joint_groups = {{0}, {1}};  // fc1, fc2
  options.joint_scales = {1.0, 0.25};
  options.expected_batch_size = 6;
  auto dp = MakeDp(net, options, 1.0);
  torch::Tensor x = torch::randn({6, 5}, torch::kFloat64) * 3;
  torch::Tensor y = torch::randint(0, 3, {6}, torch::kLong);
  // Independent computation (McMahan et al. 2018): rescale each group by 1/s_g, clip the
  // whole rescaled record to C, rescale back, i.e. one factor min(1, C / ||(g_g/s_g)_g||).
  std::vector<torch::Tensor> params = net.parameters();
  const double scale_of_param[] = {1.0, 1.0, 0.25, 0.25};
  std::vector<torch::Tensor> expected;
  for (auto& p : params) expected.push_back(torch::zeros_like(p));
  for (int64_t i = 0; i < 6; ++i) {
    auto grads = torch::autograd::grad(
        {Losses(net.reference(x.narrow(0, i, 1)), y.narrow(0, i, 1)).sum()}, params);
    double rescaled_sq = 0;
    for (size_t p = 0; p < 4; ++p) rescaled_sq += (grads[p] / scale_of_param[p]).pow(2).sum().item<double>();
    double factor = std::min(1.0, 0.5 / std::sqrt(rescaled_sq));
    for (size_t p = 0; p < 4; ++p) expected[p] -= grads[p] * factor / 6.0;
  }
  auto before = Snapshot(net);
  Losses(net.forward(x), y).sum().backward();
  ASSERT_TRUE(dp->AccumulatePhysicalBatch().ok());
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  ExpectUpdate(net, before, expected);
  ASSERT_EQ(record->sampling.queries.size(), 1u);  // one Gaussian sum query on the rescaled record
  EXPECT_DOUBLE_EQ(record->sampling.queries[0].clip_norm, 0.5);
}

TEST(DpOptimizerTest, JointClippingNoiseIsScaledPerGroup) {
  // fc1 has 20,100 coordinates (s = 1), fc2 1,010 (s = 0.25): noise sd sigma C s_g / B.
  // Sample sd of n normals has relative sd 1/sqrt(2n): 0.5% and 2.2%; bands of 5% and 12%
  // are > 5 sd (false failure < 1e-6).
  Net net(200, 100, 10);
  DpOptimizerOptions options;
  options.noise_multiplier = 1.3;
  options.clip_norm = 2.0;
  options.clipping = ClippingMode::kJoint;
  options.joint_groups = {{0}, {1}};
  options.joint_scales = {1.0, 0.25};
  options.expected_batch_size = 4;
  auto dp = MakeDp(net, options, 1.0);
  auto before = Snapshot(net);
  auto record = dp->Step();
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->sampling.queries.size(), 1u);
  EXPECT_DOUBLE_EQ(record->sampling.queries[0].noise_stddev, 2.6);
  auto after = net.parameters();
  torch::Tensor fc1 = torch::cat({(after[0] - before[0]).flatten(), (after[1] - before[1]).flatten()});
  torch::Tensor fc2 = torch::cat({(after[2] - before[2]).flatten(), (after[3] - before[3]).flatten()});
  EXPECT_NEAR(fc1.std().item<double>(), 2.6 / 4, 0.05 * 2.6 / 4);
  EXPECT_NEAR(fc2.std().item<double>(), 0.25 * 2.6 / 4, 0.12 * 0.25 * 2.6 / 4);
}

TEST(DpOptimizerTest, RejectsModelWithBatchNorm) {
  struct BnNet : torch::nn::Module {
    BnNet() {
      register_module("fc", DpLinear(3, 3));
      register_module("bn", torch::nn::BatchNorm1d(3));
    }
  } net;
  auto sgd = MakeTorchOptimizer("sgd", net.parameters(), 0.1);
  ASSERT_TRUE(sgd.ok());
  auto dp = DpOptimizer::Create(net, *std::move(sgd), DpOptimizerOptions{},
                                std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(1));
  ASSERT_FALSE(dp.ok());
  EXPECT_NE(dp.status().message().find("GroupNorm"), std::string::npos);
}

TEST(DpOptimizerTest, RejectsBadOptions) {
  Net net(2, 2, 2);
  for (auto bad : {std::pair<double, double>{-1, 0.5}, {1, 0}, {1, 1.5}}) {
    DpOptimizerOptions options;
    options.noise_multiplier = bad.first;
    options.sampling_rate = bad.second;
    auto sgd = MakeTorchOptimizer("sgd", net.parameters(), 0.1);
    auto dp = DpOptimizer::Create(net, *std::move(sgd), options,
                                  std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(1));
    EXPECT_FALSE(dp.ok());
  }
  EXPECT_FALSE(MakeTorchOptimizer("rmsprop", net.parameters(), 0.1).ok());
  EXPECT_FALSE(MakeTorchOptimizer("sgd", net.parameters(), -1).ok());
}

TEST(DpOptimizerTest, AdamAndAdagradStepWithNoisyGradients) {
  for (const char* name : {"adam", "adagrad"}) {
    Net net(4, 3, 2);
    auto opt = MakeTorchOptimizer(name, net.parameters(), 0.01);
    ASSERT_TRUE(opt.ok());
    auto dp = DpOptimizer::Create(net, *std::move(opt), DpOptimizerOptions{},
                                  std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(2));
    ASSERT_TRUE(dp.ok());
    auto before = Snapshot(net);
    Losses(net.forward(torch::randn({5, 4})), torch::randint(0, 2, {5}, torch::kLong))
        .sum()
        .backward();
    ASSERT_TRUE((*dp)->AccumulatePhysicalBatch().ok());
    ASSERT_TRUE((*dp)->Step().ok());
    // Adam/AdaGrad's first step moves every coordinate by about the learning rate.
    auto after = net.parameters();
    EXPECT_GT((after[0] - before[0]).abs().min().item<double>(), 0) << name;
  }
}

}  // namespace
}  // namespace dpkit::optim
