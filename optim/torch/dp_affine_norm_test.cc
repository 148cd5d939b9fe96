#include "dpkit/optim/torch/dp_affine_norm.h"

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;

struct GroupNormNet : torch::nn::Module {
  DpGroupNorm norm{nullptr};
  DpLinear fc{nullptr};
  GroupNormNet() {
    norm = register_module("norm", DpGroupNorm(2, 4));
    fc = register_module("fc", DpLinear(4 * 3 * 5, 3));
  }
};

TEST(DpAffineNormTest, GroupNormOverFeatureMapsMatchesBatchSizeOneLoop) {
  // 4 channels in 2 groups over 3x5 maps: the per-channel affine gradients sum 15
  // positions per example.
  torch::manual_seed(21);
  auto net = std::make_shared<GroupNormNet>();
  net->to(torch::kFloat64);
  { torch::NoGradGuard guard; net->norm->weight.uniform_(0.5, 1.5); net->norm->bias.uniform_(-1, 1); }
  auto body = [&](const torch::Tensor& x, bool reference) {
    torch::Tensor h = reference ? torch::group_norm(x, 2, net->norm->weight, net->norm->bias)
                                : net->norm(x);
    h = torch::tanh(h).flatten(1);
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  CheckAgainstLoop(model, torch::randn({5, 4, 3, 5}, torch::kFloat64),
                   torch::randint(0, 3, {5}, torch::kLong));
}

struct LayerNormNet : torch::nn::Module {
  DpLayerNorm norm{nullptr};
  DpLinear fc{nullptr};
  LayerNormNet() {
    norm = register_module("norm", DpLayerNorm(std::vector<int64_t>{3, 4}));
    fc = register_module("fc", DpLinear(2 * 3 * 4, 3));
  }
};

TEST(DpAffineNormTest, LayerNormOverTwoTrailingDimensionsMatchesBatchSizeOneLoop) {
  // normalized_shape (3, 4) on (B, 2, 3, 4): the affine parameters are (3, 4) and each
  // example's gradient sums its 2 leading positions.
  torch::manual_seed(22);
  auto net = std::make_shared<LayerNormNet>();
  net->to(torch::kFloat64);
  { torch::NoGradGuard guard; net->norm->weight.uniform_(0.5, 1.5); net->norm->bias.uniform_(-1, 1); }
  auto body = [&](const torch::Tensor& x, bool reference) {
    torch::Tensor h = reference ? torch::layer_norm(x, {3, 4}, net->norm->weight, net->norm->bias)
                                : net->norm(x);
    h = torch::tanh(h).flatten(1);
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  CheckAgainstLoop(model, torch::randn({6, 2, 3, 4}, torch::kFloat64),
                   torch::randint(0, 3, {6}, torch::kLong));
}

TEST(DpAffineNormTest, NoGradForwardMatchesLibTorchNormsAndCapturesNothing) {
  // Outside autograd the layers compute x_hat * w + b without the capturing function; in
  // float64 the result agrees with LibTorch's fused norms to rounding (1e-12 relative
  // leaves a margin of ~1e3 over the few operations' 2^-53 each).
  torch::manual_seed(23);
  DpGroupNorm group_norm(2, 4);
  DpLayerNorm layer_norm(std::vector<int64_t>{5});
  group_norm->to(torch::kFloat64);
  layer_norm->to(torch::kFloat64);
  torch::NoGradGuard guard;
  group_norm->weight.uniform_(0.5, 1.5);
  group_norm->bias.uniform_(-1, 1);
  layer_norm->weight.uniform_(0.5, 1.5);
  layer_norm->bias.uniform_(-1, 1);
  torch::Tensor x = torch::randn({3, 4, 5}, torch::kFloat64);
  EXPECT_LT(RelativeError(group_norm(x),
                          torch::group_norm(x, 2, group_norm->weight, group_norm->bias)),
            1e-12);
  EXPECT_LT(RelativeError(layer_norm(x),
                          torch::layer_norm(x, {5}, layer_norm->weight, layer_norm->bias)),
            1e-12);
  EXPECT_FALSE(group_norm->HasCapture());
  EXPECT_FALSE(layer_norm->HasCapture());
}

TEST(DpAffineNormTest, RejectsChannelsNotAMultipleOfGroupsAndEmptyShapes) {
  EXPECT_THROW(DpGroupNorm(3, 4), c10::Error);
  EXPECT_THROW(DpLayerNorm(std::vector<int64_t>{}), c10::Error);
}

}  // namespace
}  // namespace dpkit::optim
