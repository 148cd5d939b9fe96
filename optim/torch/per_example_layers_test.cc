#include "dpkit/optim/torch/per_example_layers.h"

#include <string>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

struct BatchNormNet : torch::nn::Module {
  DpConv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  BatchNormNet() {
    conv = register_module("conv", DpConv2d(DpConv2dOptions{}));
    bn = register_module("bn", torch::nn::BatchNorm2d(1));
  }
};

TEST(PerExampleLayersTest, RejectsBatchNormSuggestingGroupNorm) {
  BatchNormNet net;
  std::vector<NamedPerExampleLayer> layers;
  absl::Status status = ValidateForPerExampleGradients(net, &layers);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("'bn'"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("GroupNorm"), std::string::npos) << status.message();
}

struct PlainLinearNet : torch::nn::Module {
  DpLinear fc1{nullptr};
  torch::nn::Linear fc2{nullptr};
  PlainLinearNet() {
    fc1 = register_module("fc1", DpLinear(3, 3));
    fc2 = register_module("fc2", torch::nn::Linear(3, 2));
  }
};

TEST(PerExampleLayersTest, RejectsLayerWithoutRuleNamingIt) {
  PlainLinearNet net;
  std::vector<NamedPerExampleLayer> layers;
  absl::Status status = ValidateForPerExampleGradients(net, &layers);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("'fc2'"), std::string::npos) << status.message();
}

TEST(PerExampleLayersTest, ListsSupportedLayersInOrder) {
  LinearNet net;
  std::vector<NamedPerExampleLayer> layers;
  ASSERT_TRUE(ValidateForPerExampleGradients(net, &layers).ok());
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].name, "fc1");
  EXPECT_EQ(layers[1].name, "fc2");
}

}  // namespace
}  // namespace dpkit::optim
