#include "dpkit/optim/torch/make_private.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "dpkit/accounting/calibrate.h"
#include "gtest/gtest.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/optim/torch/dp_optimizer.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace nn = torch::nn;

// A user's own module class: its layers in containers that call them through the tree.
struct UserNet : nn::Module {
  nn::Sequential features{nullptr};
  nn::ModuleList heads{nullptr};
  nn::ModuleDict extra{nullptr};
  UserNet() {
    features = register_module(
        "features",
        nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::ReLU(),
                       nn::MaxPool2d(2), nn::Flatten(), nn::Linear(4 * 4 * 4, 12), nn::Tanh()));
    heads = register_module("heads", nn::ModuleList(nn::Linear(12, 3), nn::Linear(12, 3)));
    extra = register_module(
        "extra", nn::ModuleDict(torch::OrderedDict<std::string, std::shared_ptr<nn::Module>>{
                     {"scale", nn::Linear(3, 3).ptr()}}));
  }
};

// The model's output: heads[0] + heads[1], then extra["scale"], all looked up at call time.
torch::Tensor Output(UserNet& net, const torch::Tensor& x) {
  torch::Tensor h = net.features->forward(x);
  torch::Tensor y;
  for (const auto& head : *net.heads) {
    torch::Tensor out;
    if (auto* dp = head->as<DpLinearImpl>()) out = dp->forward(h);
    if (auto* plain = head->as<nn::LinearImpl>()) out = plain->forward(h);
    y = y.defined() ? y + out : out;
  }
  std::shared_ptr<nn::Module> scale = net.extra["scale"];
  if (auto* dp = scale->as<DpLinearImpl>()) return dp->forward(y);
  return scale->as<nn::LinearImpl>()->forward(y);
}

std::map<std::string, torch::TensorImpl*> ParameterImpls(nn::Module& m) {
  std::map<std::string, torch::TensorImpl*> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().unsafeGetTensorImpl();
  return out;
}

TEST(MakePrivateTest, ReplacementKeepsParameterTensorsAndOutputsBitForBit) {
  torch::manual_seed(1);
  UserNet net;
  torch::Tensor x = torch::randn({5, 1, 8, 8});
  torch::Tensor before = Output(net, x);
  std::map<std::string, torch::TensorImpl*> impls = ParameterImpls(net);
  ASSERT_TRUE(ConvertToPerExample(net).ok());
  EXPECT_EQ(ParameterImpls(net), impls);  // same names, same tensors
  EXPECT_NE(net.features[0]->as<DpConv2dImpl>(), nullptr);
  EXPECT_NE(net.features[4]->as<DpLinearImpl>(), nullptr);
  EXPECT_NE(net.heads[1]->as<DpLinearImpl>(), nullptr);
  EXPECT_NE(net.extra["scale"]->as<DpLinearImpl>(), nullptr);
  EXPECT_TRUE(torch::equal(Output(net, x), before));
  std::vector<NamedPerExampleLayer> layers;
  EXPECT_TRUE(ValidateForPerExampleGradients(net, &layers).ok());
  EXPECT_EQ(layers.size(), 5u);
}

TEST(MakePrivateTest, SequenceEmbeddingAndNormsKeepTheirOutputs) {
  torch::manual_seed(2);
  nn::Sequential seq(nn::Embedding(20, 6), nn::LayerNorm(nn::LayerNormOptions({6})),
                     nn::Linear(6, 4));
  nn::Sequential image(nn::Conv2d(nn::Conv2dOptions(2, 4, 3)), nn::GroupNorm(2, 4));
  torch::Tensor tokens = torch::randint(0, 20, {3, 7}, torch::kLong);
  torch::Tensor pixels = torch::randn({3, 2, 6, 6});
  torch::Tensor seq_before = seq->forward(tokens), image_before = image->forward(pixels);
  ASSERT_TRUE(ConvertToPerExample(*seq).ok());
  ASSERT_TRUE(ConvertToPerExample(*image).ok());
  EXPECT_NE(seq[0]->as<DpEmbeddingImpl>(), nullptr);
  EXPECT_NE(seq[1]->as<DpLayerNormImpl>(), nullptr);
  EXPECT_NE(image[1]->as<DpGroupNormImpl>(), nullptr);
  // The affine norms apply weight and bias after LibTorch's normalisation (one rounding
  // more than the fused kernel), and Linear over (B, T, in) is one addmm where torch's is
  // matmul then add: float32 rounding, 1e-6 relative.
  EXPECT_LT(RelativeError(seq->forward(tokens), seq_before), 1e-6);
  EXPECT_LT(RelativeError(image->forward(pixels), image_before), 1e-6);
}

TEST(MakePrivateTest, ReplacesConv1dKeepingParameterTensorsAndOutputsBitForBit) {
  torch::manual_seed(7);
  // Grouped, dilated, "same" (even kernel: asymmetric), reflect-padded and bias-free
  // one-dimensional convolutions over (B, C, L).
  nn::Sequential net(
      nn::Conv1d(nn::Conv1dOptions(3, 6, 4).padding(torch::kSame)), nn::ReLU(),
      nn::Conv1d(nn::Conv1dOptions(6, 4, 3).groups(2).dilation(2).padding(2).bias(false)),
      nn::Conv1d(nn::Conv1dOptions(4, 4, 3).stride(2).padding(1).padding_mode(torch::kReflect)),
      nn::Flatten(), nn::Linear(4 * 6, 2));
  torch::Tensor x = torch::randn({5, 3, 12});
  torch::Tensor before = net->forward(x);
  std::map<std::string, torch::TensorImpl*> impls = ParameterImpls(*net);
  ASSERT_TRUE(ConvertToPerExample(*net).ok());
  EXPECT_EQ(ParameterImpls(*net), impls);  // same names (no "2.bias"), same tensors
  for (int i : {0, 2, 3}) EXPECT_NE(net[i]->as<DpConv1dImpl>(), nullptr) << i;
  EXPECT_TRUE(torch::equal(net->forward(x), before));
  // A DP step: every trainable parameter belongs to a rule (the bias-free layer has one).
  DpOptimizerOptions options;
  options.expected_batch_size = 5;
  auto dp = DpOptimizer::Create(*net, *MakeTorchOptimizer("sgd", net->parameters(), 0.1),
                                options,
                                std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(2));
  ASSERT_TRUE(dp.ok()) << dp.status();
  PerExampleLoss(net->forward(x), torch::tensor({0, 1, 1, 0, 1}, torch::kLong)).sum().backward();
  ASSERT_TRUE((*dp)->AccumulatePhysicalBatch().ok());
  EXPECT_EQ((*dp)->last_norms().size(), 5u);
}

TEST(MakePrivateTest, ConvertedModelMatchesTheBatchSizeOneLoop) {
  torch::manual_seed(3);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 3, 3)), nn::GroupNorm(1, 3), nn::ReLU(),
                     nn::Flatten(), nn::Linear(3 * 4 * 4, 5),
                     nn::LayerNorm(nn::LayerNormOptions({5})), nn::Linear(5, 3));
  net->to(torch::kFloat64);
  ASSERT_TRUE(ConvertToPerExample(*net).ok());
  nn::SequentialImpl* seq = net.get();
  TestModel model = ModelFromBody(net.ptr(), [seq](const torch::Tensor& x, bool reference) {
    if (!reference) return seq->forward(x);
    // Plain ops on the same (shared) parameters.
    auto* conv = seq->ptr(0)->as<DpConv2dImpl>();
    auto* gn = seq->ptr(1)->as<DpGroupNormImpl>();
    auto* fc1 = seq->ptr(4)->as<DpLinearImpl>();
    auto* ln = seq->ptr(5)->as<DpLayerNormImpl>();
    auto* fc2 = seq->ptr(6)->as<DpLinearImpl>();
    torch::Tensor h = torch::conv2d(x, conv->weight, conv->bias);
    h = torch::relu(torch::group_norm(h, 1, gn->weight, gn->bias)).flatten(1);
    h = torch::layer_norm(torch::addmm(fc1->bias, h, fc1->weight.t()), {5}, ln->weight, ln->bias);
    return torch::addmm(fc2->bias, h, fc2->weight.t());
  });
  torch::Tensor x = torch::randn({4, 1, 6, 6}, torch::kFloat64);
  CheckAgainstLoop(model, x, torch::tensor({0, 2, 1, 2}, torch::kLong));
}

// The hand-written equivalent of the plain model below.
struct HandWritten : nn::Module {
  DpConv2d conv{nullptr};
  DpLinear fc{nullptr};
  HandWritten() {
    DpConv2dOptions o;
    o.in_channels = 1, o.out_channels = 4, o.kernel_size = {3, 3};
    conv = register_module("conv", DpConv2d(o));
    fc = register_module("fc", DpLinear(4 * 6 * 6, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(torch::relu(conv(x)).flatten(1)); }
};

TEST(MakePrivateTest, StepEqualsTheHandWrittenDpModelsStep) {
  torch::manual_seed(4);
  nn::Sequential plain(nn::Conv2d(nn::Conv2dOptions(1, 4, 3)), nn::ReLU(), nn::Flatten(),
                       nn::Linear(4 * 6 * 6, 3));
  HandWritten hand;
  {
    torch::NoGradGuard no_grad;
    hand.conv->weight.copy_(plain[0]->as<nn::Conv2dImpl>()->weight);
    hand.conv->bias.copy_(plain[0]->as<nn::Conv2dImpl>()->bias);
    hand.fc->weight.copy_(plain[3]->as<nn::LinearImpl>()->weight);
    hand.fc->bias.copy_(plain[3]->as<nn::LinearImpl>()->bias);
  }
  ASSERT_TRUE(ConvertToPerExample(*plain).ok());
  DpOptimizerOptions options;
  options.noise_multiplier = 0;  // deterministic: clipping and averaging only
  options.clip_norm = 0.5;
  options.expected_batch_size = 6;
  auto make = [&](nn::Module& m) {
    return *DpOptimizer::Create(m, *MakeTorchOptimizer("sgd", m.parameters(), 0.1), options,
                                std::make_unique<mechanisms::SeededRandomGeneratorForTesting>(1));
  };
  std::unique_ptr<DpOptimizer> dp_plain = make(*plain), dp_hand = make(hand);
  torch::Tensor x = torch::randn({6, 1, 8, 8});
  torch::Tensor y = torch::tensor({0, 1, 2, 0, 1, 2}, torch::kLong);
  PerExampleLoss(plain->forward(x), y).sum().backward();
  PerExampleLoss(hand.forward(x), y).sum().backward();
  ASSERT_TRUE(dp_plain->AccumulatePhysicalBatch().ok());
  ASSERT_TRUE(dp_hand->AccumulatePhysicalBatch().ok());
  EXPECT_EQ(dp_plain->last_norms(), dp_hand->last_norms());
  ASSERT_TRUE(dp_plain->Step().ok());
  ASSERT_TRUE(dp_hand->Step().ok());
  std::vector<torch::Tensor> a = plain->parameters(), b = hand.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
}

std::string ConvertError(nn::Module& m) { return std::string(ConvertToPerExample(m).message()); }

TEST(MakePrivateTest, RefusesBatchNormNamingItsPath) {
  struct Net : nn::Module {
    nn::Sequential body{nullptr};
    Net() {
      body = register_module(
          "body", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 2, 3)), nn::BatchNorm2d(2)));
    }
  } net;
  EXPECT_EQ(ConvertError(net),
            "MakePrivate: module 'body.1' (torch::nn::BatchNorm2dImpl) mixes the examples of a "
            "batch, so per-example gradients are undefined: use torch::nn::GroupNorm instead");
  // Nothing was replaced.
  EXPECT_NE(net.body[0]->as<nn::Conv2dImpl>(), nullptr);
}

TEST(MakePrivateTest, RefusesUnknownParametrisedModules) {
  nn::Sequential prelu(nn::Linear(3, 3), nn::PReLU());
  EXPECT_EQ(ConvertError(*prelu),
            "MakePrivate: module '1' (torch::nn::PReLUImpl) has trainable parameters without a "
            "per-example gradient rule: use torch::nn::Linear, Conv1d, Conv2d, Embedding, "
            "LayerNorm, GroupNorm, MultiheadAttention, LSTM, GRU or RNN (or a dpkit Dp* layer), "
            "or freeze them (requires_grad false)");
  struct Custom : nn::Module {
    torch::Tensor scale = register_parameter("scale", torch::ones({3}));
    torch::Tensor forward(const torch::Tensor& x) { return x * scale; }
  };
  nn::Sequential custom(nn::Linear(3, 3));
  custom->push_back(std::make_shared<Custom>());
  EXPECT_NE(ConvertError(*custom).find("module '1' ("), std::string::npos);
  EXPECT_NE(ConvertError(*custom).find("has trainable parameters without a per-example"),
            std::string::npos);
  nn::Sequential bilinear(nn::Linear(3, 3));
  bilinear->push_back(nn::Bilinear(3, 3, 2));
  EXPECT_NE(ConvertError(*bilinear).find("module '1' (torch::nn::BilinearImpl) has trainable"),
            std::string::npos);
  // torch::nn::MultiheadAttention is replaced (make_private_attention_test), also in a
  // ModuleDict, looked up at call time.
  nn::ModuleDict attention(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
      {"attn", nn::MultiheadAttention(8, 2).ptr()}});
  EXPECT_TRUE(ConvertToPerExample(*attention).ok());
  EXPECT_NE(attention["attn"]->as<DpTorchMultiheadAttentionImpl>(), nullptr);
  nn::Sequential conv3d(nn::Linear(2, 2), nn::Conv3d(2, 2, 3));
  EXPECT_EQ(ConvertError(*conv3d),
            "MakePrivate: module '1' (torch::nn::Conv3dImpl) has no per-example gradient rule "
            "(Conv1d and Conv2d have): fold one spatial axis into the channels or batch and use "
            "torch::nn::Conv2d");
  for (auto transposed : {nn::Sequential(nn::ConvTranspose1d(2, 2, 3)),
                          nn::Sequential(nn::ConvTranspose2d(2, 2, 3)),
                          nn::Sequential(nn::ConvTranspose3d(2, 2, 3))}) {
    EXPECT_NE(ConvertError(*transposed).find("has no per-example gradient rule: upsample "
                                             "(torch::nn::Upsample) and use torch::nn::Conv1d "
                                             "or Conv2d instead"),
              std::string::npos);
  }
  // Frozen parameters need no rule.
  nn::Sequential frozen(nn::Linear(3, 3), nn::PReLU());
  frozen[1]->as<nn::PReLUImpl>()->weight.set_requires_grad(false);
  EXPECT_TRUE(ConvertToPerExample(*frozen).ok());
}

// Bias-free Linear layers (transformer projections, LoRA-style adapters) over sequences:
// the same tensors and outputs, no "bias" parameter, and every rule against the loop.
TEST(MakePrivateTest, ReplacesBiasFreeLinearAndMatchesTheBatchSizeOneLoop) {
  torch::manual_seed(11);
  nn::Sequential net(nn::Linear(nn::LinearOptions(6, 5).bias(false)), nn::Tanh(), nn::Flatten(),
                     nn::Linear(nn::LinearOptions(3 * 5, 3).bias(false)));
  net->to(torch::kFloat64);
  torch::Tensor x = torch::randn({4, 3, 6}, torch::kFloat64);
  torch::Tensor before = net->forward(x);
  std::map<std::string, torch::TensorImpl*> impls = ParameterImpls(*net);
  ASSERT_TRUE(ConvertToPerExample(*net).ok());
  EXPECT_EQ(ParameterImpls(*net), impls);  // "0.weight" and "3.weight" only
  EXPECT_EQ(impls.size(), 2u);
  EXPECT_TRUE(torch::equal(net->forward(x), before));
  EXPECT_EQ(net[0]->as<DpLinearImpl>()->Describe(), "DpLinear(6, 5, bias=false)");
  nn::SequentialImpl* seq = net.get();
  TestModel model = ModelFromBody(net.ptr(), [seq](const torch::Tensor& in, bool reference) {
    if (!reference) return seq->forward(in);
    auto* fc1 = seq->ptr(0)->as<DpLinearImpl>();
    auto* fc2 = seq->ptr(3)->as<DpLinearImpl>();
    torch::Tensor h = torch::tanh(torch::matmul(in, fc1->weight.t())).flatten(1);
    return torch::matmul(h, fc2->weight.t());
  });
  CheckAgainstLoop(model, x, torch::tensor({0, 2, 1, 2}, torch::kLong));
}

// A bias-free Conv2d (the convolution before a normalisation, as in ResNets with GroupNorm).
TEST(MakePrivateTest, ReplacesBiasFreeConv2dAndMatchesTheBatchSizeOneLoop) {
  torch::manual_seed(12);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(2, 3, 3).padding(1).bias(false)),
                     nn::GroupNorm(1, 3), nn::ReLU(), nn::Flatten(), nn::Linear(3 * 5 * 5, 3));
  net->to(torch::kFloat64);
  torch::Tensor x = torch::randn({4, 2, 5, 5}, torch::kFloat64);
  torch::Tensor before = net->forward(x);
  torch::Tensor conv_before = net[0]->as<nn::Conv2dImpl>()->forward(x);
  std::map<std::string, torch::TensorImpl*> impls = ParameterImpls(*net);
  ASSERT_TRUE(ConvertToPerExample(*net).ok());
  EXPECT_EQ(ParameterImpls(*net), impls);
  EXPECT_EQ(impls.count("0.bias"), 0u);
  // The convolution bit for bit; the whole model to rounding (the affine norm applies its
  // affine after the normalisation).
  EXPECT_TRUE(torch::equal(net[0]->as<DpConv2dImpl>()->forward(x), conv_before));
  EXPECT_TRUE(torch::allclose(net->forward(x), before, 1e-13, 1e-13));
  nn::SequentialImpl* seq = net.get();
  TestModel model = ModelFromBody(net.ptr(), [seq](const torch::Tensor& in, bool reference) {
    if (!reference) return seq->forward(in);
    auto* conv = seq->ptr(0)->as<DpConv2dImpl>();
    auto* gn = seq->ptr(1)->as<DpGroupNormImpl>();
    auto* fc = seq->ptr(4)->as<DpLinearImpl>();
    torch::Tensor h = torch::conv2d(in, conv->weight, {}, 1, 1);
    h = torch::relu(torch::group_norm(h, 1, gn->weight, gn->bias)).flatten(1);
    return torch::addmm(fc->bias, h, fc->weight.t());
  });
  CheckAgainstLoop(model, x, torch::tensor({0, 2, 1, 2}, torch::kLong));
}

TEST(MakePrivateTest, RefusesConfigurationsWithoutARule) {
  nn::Sequential padded(nn::Embedding(nn::EmbeddingOptions(10, 3).padding_idx(0)));
  EXPECT_NE(ConvertError(*padded).find("module '0' (torch::nn::EmbeddingImpl) uses padding_idx"),
            std::string::npos);
  nn::Sequential grouped(nn::Conv2d(nn::Conv2dOptions(2, 2, 3).groups(2)));
  EXPECT_NE(ConvertError(*grouped).find("DpConv2d does not support"), std::string::npos);
  nn::Linear root(3, 3);
  EXPECT_EQ(ConvertError(*root),
            "MakePrivate: module '(root)' (torch::nn::LinearImpl) is a single layer: wrap it in "
            "a torch::nn::Sequential");
}

// A user class calling its layer through a typed member holder, which the replacement
// cannot redirect: backward stops instead of training without clipping.
struct StaleHolder : nn::Module {
  nn::Linear fc{nullptr};
  StaleHolder() { fc = register_module("fc", nn::Linear(4, 2)); }
  torch::Tensor forward(const torch::Tensor& x) { return fc(x); }
};

TEST(MakePrivateTest, StopsBackwardWhenAReplacedParameterGetsAnOrdinaryGradient) {
  StaleHolder net;
  ASSERT_TRUE(ConvertToPerExample(net).ok());
  torch::Tensor loss = net.forward(torch::randn({3, 4})).sum();
  try {
    loss.backward();
    ADD_FAILURE() << "backward did not stop";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("MakePrivate: parameter 'fc."), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("received an ordinary (unclipped) gradient"),
              std::string::npos);
  }
}

TEST(MakePrivateTest, ConversionLeavesTheSeededRandomStreamAlone) {
  torch::manual_seed(5);
  nn::Sequential a(nn::Linear(3, 3), nn::Embedding(4, 2));
  torch::Tensor without = torch::randn({4});
  torch::manual_seed(5);
  nn::Sequential b(nn::Linear(3, 3), nn::Embedding(4, 2));
  ASSERT_TRUE(ConvertToPerExample(*b).ok());
  EXPECT_TRUE(torch::equal(torch::randn({4}), without));
}

TEST(MakePrivateTest, MakePrivateTrainsAndAccountsItsSteps) {
  torch::manual_seed(6);
  nn::Sequential net(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  torch::Tensor x = torch::randn({200, 4});
  torch::Tensor y = (x.select(1, 0) > 0).to(torch::kLong);
  auto sgd = std::make_unique<torch::optim::SGD>(net->parameters(), 0.5);
  MakePrivateOptions options;
  options.noise_multiplier = 1.0, options.max_grad_norm = 1.0;
  options.dataset_size = 200, options.expected_batch_size = 50;
  auto training = MakePrivate(*net, std::move(sgd), options);
  ASSERT_TRUE(training.ok()) << training.status();
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<torch::Tensor> batch = (*training)->NextBatch();
    ASSERT_TRUE(batch.ok());
    PerExampleLoss(net->forward(x.index_select(0, *batch)), y.index_select(0, *batch))
        .sum()
        .backward();
    ASSERT_TRUE((*training)->Step().ok());
  }
  EXPECT_EQ((*training)->steps(), 3);
  absl::StatusOr<double> epsilon = (*training)->Epsilon(1e-5);
  ASSERT_TRUE(epsilon.ok());
  EXPECT_GT(*epsilon, 0);
  EXPECT_TRUE(std::isfinite(*epsilon));
}

TEST(MakePrivateTest, MakePrivateWithEpsilonMeetsTheBudget) {
  nn::Sequential net(nn::Linear(4, 2));
  MakePrivateOptions options;
  options.dataset_size = 1000, options.expected_batch_size = 100;
  auto training = MakePrivateWithEpsilon(
      *net, std::make_unique<torch::optim::SGD>(net->parameters(), 0.1), options, 2.0, 1e-5, 3);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_GT((*training)->noise_multiplier(), 0.3);
  // 3 epochs of q = 0.1: 30 steps, re-accounted.
  accounting::Result<double> spent = accounting::DpSgdEpsilon(
      0.1, (*training)->noise_multiplier(), 30, 1e-5, accounting::Accountant::kPld);
  ASSERT_TRUE(spent.ok());
  EXPECT_LE(spent.value(), 2.0);
}

}  // namespace
}  // namespace dpkit::optim
