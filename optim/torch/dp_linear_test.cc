#include "dpkit/optim/torch/dp_linear.h"

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;

TEST(DpLinearTest, LinearMatchesBatchSizeOneLoop) {
  torch::manual_seed(1);
  auto net = std::make_shared<LinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net, [&](const torch::Tensor& x) { return net->fc2(torch::tanh(net->fc1(x))); },
                  [&](const torch::Tensor& x) {
                    return F::linear(torch::tanh(F::linear(x, net->fc1->weight, net->fc1->bias)),
                                     net->fc2->weight, net->fc2->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({7, 6}, torch::kFloat64),
                   torch::randint(0, 3, {7}, torch::kLong));
}

TEST(DpLinearTest, LinearOverSequencePositionsMatchesBatchSizeOneLoop) {
  torch::manual_seed(2);
  auto net = std::make_shared<LinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net,
                  [&](const torch::Tensor& x) { return net->fc2(torch::relu(net->fc1(x)).mean(1)); },
                  [&](const torch::Tensor& x) {
                    return F::linear(
                        torch::relu(F::linear(x, net->fc1->weight, net->fc1->bias)).mean(1),
                        net->fc2->weight, net->fc2->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({5, 4, 6}, torch::kFloat64),
                   torch::randint(0, 3, {5}, torch::kLong));
}

struct WideLinearNet : torch::nn::Module {
  DpLinear fc1{nullptr}, fc2{nullptr};
  WideLinearNet() {
    fc1 = register_module("fc1", DpLinear(64, 48));
    fc2 = register_module("fc2", DpLinear(48, 3));
  }
};

TEST(DpLinearTest, ProductsSplitAcrossTwoThreadsMatchBatchSizeOneLoop) {
  // At 2 LibTorch threads with per-example products above the size from which they are
  // split across threads (ghost Gram products of fc1 over 32 positions: 32 x 64 x 32
  // multiply-adds per example; materialised: 48 x 32 x 64), each thread computes the
  // norms of its own range of examples; the results must not depend on the split.
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  torch::manual_seed(9);
  auto net = std::make_shared<WideLinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net,
                  [&](const torch::Tensor& x) { return net->fc2(torch::tanh(net->fc1(x)).mean(1)); },
                  [&](const torch::Tensor& x) {
                    return F::linear(
                        torch::tanh(F::linear(x, net->fc1->weight, net->fc1->bias)).mean(1),
                        net->fc2->weight, net->fc2->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({7, 32, 64}, torch::kFloat64),
                   torch::randint(0, 3, {7}, torch::kLong));
  torch::set_num_threads(threads);
}

struct LargeLinearNet : torch::nn::Module {
  DpLinear fc{nullptr};
  LargeLinearNet() { fc = register_module("fc", DpLinear(1024, 640)); }
};

TEST(DpLinearTest, LargeWeightedSumSplitAcrossTwoThreadsMatchesBatchSizeOneLoop) {
  // Materialised per-example gradients of 2 x 640 x 1024 = 1.3 M elements: at 2 threads
  // the clip-factor-weighted sum splits the columns across the threads (from 1 M elements).
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  torch::manual_seed(14);
  auto net = std::make_shared<LargeLinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net, [&](const torch::Tensor& x) { return net->fc(x); },
                  [&](const torch::Tensor& x) {
                    return F::linear(x, net->fc->weight, net->fc->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({2, 1024}, torch::kFloat64),
                   torch::randint(0, 640, {2}, torch::kLong));
  torch::set_num_threads(threads);
}

TEST(DpLinearTest, Float32NormsAgreeWithFloat64Norms) {
  torch::manual_seed(6);
  DpLinear layer(30, 20);
  torch::Tensor x = torch::randn({8, 30});
  layer(x).pow(2).sum().backward();
  std::vector<torch::Tensor> ghost, materialized;
  layer->SetNormMethod(NormMethod::kGhost);
  layer->AppendSquaredNorms(&ghost);
  layer->SetNormMethod(NormMethod::kMaterialize);
  layer->AppendSquaredNorms(&materialized);
  // float32 products of 30 terms: relative rounding ~30 * 6e-8; 1e-5 leaves margin.
  EXPECT_LT(RelativeError(ghost[0], materialized[0]), 1e-5);
}

TEST(DpLinearTest, ParametersGetNoOrdinaryGradient) {
  DpLinear layer(3, 2);
  layer(torch::randn({4, 3})).sum().backward();
  EXPECT_FALSE(layer->weight.grad().defined());
  EXPECT_TRUE(layer->HasCapture());
  EXPECT_EQ(layer->CapturedBatchSize(), 4);
}

TEST(DpLinearTest, NoGradForwardCapturesNothing) {
  DpLinear layer(3, 2);
  torch::NoGradGuard guard;
  torch::Tensor y = layer(torch::randn({4, 3}));
  EXPECT_EQ(y.size(1), 2);
  EXPECT_FALSE(layer->HasCapture());
}

}  // namespace
}  // namespace dpkit::optim
