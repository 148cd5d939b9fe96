// MakePrivate on attention models: torch::nn::MultiheadAttention replaced by
// DpTorchMultiheadAttention sharing its parameter tensors (make_private.h, dp_attention.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/make_private.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace nn = torch::nn;
using AttentionOutput = std::tuple<torch::Tensor, torch::Tensor>;

// A user's own classifier over token sequences (0 = padding): embeddings, self-attention held
// in a one-element Sequential member (the route make_private.h documents; the Sequential calls
// it with torch's arguments), a mean over the real positions and a head.
struct UserAttentionModel : nn::Module {
  nn::Sequential embed{nullptr}, attention{nullptr}, head{nullptr};
  explicit UserAttentionModel(const nn::MultiheadAttentionOptions& options) {
    embed = register_module("embed", nn::Sequential(nn::Embedding(12, 8)));
    attention = register_module("attention", nn::Sequential(nn::MultiheadAttention(options)));
    head = register_module("head", nn::Sequential(nn::Tanh(), nn::Linear(8, 3)));
  }
  AttentionOutput Attend(const torch::Tensor& tokens) {
    torch::Tensor x = embed->forward(tokens).transpose(0, 1);  // (T, B, E)
    return attention->forward<AttentionOutput>(x, x, x, tokens.eq(0));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor out = std::get<0>(Attend(tokens)).transpose(0, 1);  // (B, T, E)
    torch::Tensor real = tokens.ne(0).to(out.scalar_type()).unsqueeze(-1);
    return head->forward((out * real).sum(1) / real.sum(1));
  }
};

std::map<std::string, torch::TensorImpl*> ParameterImpls(nn::Module& m) {
  std::map<std::string, torch::TensorImpl*> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().unsafeGetTensorImpl();
  return out;
}

torch::Tensor PaddedTokens() {
  return torch::tensor({{3, 5, 3, 3, 7, 11}, {2, 2, 9, 4, 0, 0}, {1, 6, 1, 0, 0, 0},
                        {8, 0, 0, 0, 0, 0}, {10, 4, 4, 10, 5, 0}},
                       torch::kLong);
}

TEST(MakePrivateAttentionTest, ReplacementKeepsParameterTensorsOutputsAndWeightsBitForBit) {
  for (const auto& options : {nn::MultiheadAttentionOptions(8, 2),
                              nn::MultiheadAttentionOptions(8, 4).bias(false),
                              nn::MultiheadAttentionOptions(8, 2).add_bias_kv(true)
                                  .add_zero_attn(true)}) {
    torch::manual_seed(1);
    UserAttentionModel net(options);
    torch::Tensor tokens = PaddedTokens();
    AttentionOutput before = net.Attend(tokens);
    std::map<std::string, torch::TensorImpl*> impls = ParameterImpls(net);
    ASSERT_TRUE(ConvertToPerExample(net).ok());
    // attention.0.in_proj_weight, .in_proj_bias, .out_proj.weight, ...: the same tensors.
    EXPECT_EQ(ParameterImpls(net), impls);
    EXPECT_NE(net.attention[0]->as<DpTorchMultiheadAttentionImpl>(), nullptr);
    AttentionOutput after = net.Attend(tokens);
    EXPECT_TRUE(torch::equal(std::get<0>(after), std::get<0>(before)));
    EXPECT_TRUE(torch::equal(std::get<1>(after), std::get<1>(before)));
    std::vector<NamedPerExampleLayer> layers;
    ASSERT_TRUE(ValidateForPerExampleGradients(net, &layers).ok());
    ASSERT_EQ(layers.size(), 4u);
    EXPECT_EQ(layers[1].name, "attention.0");
    EXPECT_EQ(layers[2].name, "attention.0.out_proj");
  }
}

TEST(MakePrivateAttentionTest, DpStepEqualsTheHandComputedClippedStep) {
  torch::manual_seed(3);
  const auto options = nn::MultiheadAttentionOptions(8, 2).add_bias_kv(true);
  UserAttentionModel net(options), plain(options);  // `plain` stays torch::nn
  net.to(torch::kFloat64);
  plain.to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    // Generic biases (torch initialises in_proj_bias and out_proj.bias to zero).
    for (const auto& p : net.named_parameters()) p.value().uniform_(-0.5, 0.5);
    auto target = plain.named_parameters();
    for (const auto& p : net.named_parameters()) target[p.key()].copy_(p.value());
  }
  const double lr = 0.5, clip = 0.3;
  const int64_t batch = 5;
  torch::Tensor tokens = PaddedTokens();
  torch::Tensor labels = torch::tensor({0, 2, 1, 1, 0}, torch::kLong);
  // Hand-computed: each example's gradient by autograd through torch's attention, clipped
  // to norm C, summed, divided by B.
  std::vector<std::string> names = plain.named_parameters().keys();
  std::vector<torch::Tensor> params = plain.parameters(), update;
  for (const torch::Tensor& p : params) update.push_back(torch::zeros_like(p));
  for (int64_t i = 0; i < batch; ++i) {
    torch::Tensor loss =
        PerExampleLoss(plain.forward(tokens.narrow(0, i, 1)), labels.narrow(0, i, 1)).sum();
    std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, params);
    double squared = 0;
    for (const torch::Tensor& g : grads) squared += g.pow(2).sum().item<double>();
    const double factor = std::min(1.0, clip / std::sqrt(squared));
    for (size_t k = 0; k < grads.size(); ++k) update[k] += grads[k] * (lr * factor / batch);
  }
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : net.named_parameters()) before[p.key()] = p.value().clone();

  MakePrivateOptions private_options;
  private_options.noise_multiplier = 0;  // deterministic: clipping and averaging only
  private_options.max_grad_norm = clip;
  private_options.dataset_size = 50;
  private_options.expected_batch_size = batch;
  auto training = MakePrivate(net, std::make_unique<torch::optim::SGD>(net.parameters(), lr),
                              private_options);
  ASSERT_TRUE(training.ok()) << training.status();
  PerExampleLoss(net.forward(tokens), labels).sum().backward();
  ASSERT_TRUE((*training)->Step().ok());
  for (size_t k = 0; k < names.size(); ++k) {
    torch::Tensor applied = before[names[k]] - net.named_parameters()[names[k]];
    // float64 throughout: the two computations differ by rounding (~1e-15 relative).
    EXPECT_LT(RelativeError(applied, update[k]), 1e-10) << names[k];
  }
  const std::vector<double>& norms = (*training)->optimizer().last_norms();
  EXPECT_GT(*std::max_element(norms.begin(), norms.end()), clip);  // clipping took place
}

// The usual way to hold attention in a user class: a member holder, which the conversion
// cannot redirect (make_private.h). Backward stops instead of training without clipping.
struct MemberAttention : nn::Module {
  nn::MultiheadAttention attention{nullptr};
  MemberAttention() { attention = register_module("attention", nn::MultiheadAttention(4, 2)); }
  torch::Tensor forward(const torch::Tensor& x) { return std::get<0>(attention(x, x, x)); }
};

TEST(MakePrivateAttentionTest, AMemberHolderStopsBackward) {
  MemberAttention net;
  ASSERT_TRUE(ConvertToPerExample(net).ok());
  torch::Tensor loss = net.forward(torch::randn({3, 2, 4})).sum();
  try {
    loss.backward();
    ADD_FAILURE() << "backward did not stop";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("MakePrivate: parameter 'attention."), std::string::npos);
  }
}

TEST(MakePrivateAttentionTest, RefusesTransformerLayersAndPartlyFrozenAttention) {
  nn::Sequential encoder(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(8, 2)));
  EXPECT_EQ(std::string(ConvertToPerExample(*encoder).message()),
            "MakePrivate: module '0' (torch::nn::TransformerEncoderLayerImpl) calls its "
            "attention, Linear and LayerNorm layers through member holders, which cannot be "
            "made private (make_private.h): write the block with torch::nn::MultiheadAttention, "
            "Linear and LayerNorm held in torch::nn::Sequential members");
  nn::Sequential decoder(nn::TransformerDecoderLayer(nn::TransformerDecoderLayerOptions(8, 2)));
  EXPECT_FALSE(ConvertToPerExample(*decoder).ok());
  nn::Sequential partly(nn::MultiheadAttention(8, 2));
  partly[0]->as<nn::MultiheadAttentionImpl>()->out_proj->weight.set_requires_grad(false);
  EXPECT_EQ(std::string(ConvertToPerExample(*partly).message()),
            "MakePrivate: module '0' (torch::nn::MultiheadAttention) has frozen and trainable "
            "parameters together (out_proj included): freeze all of them or none");
}

}  // namespace
}  // namespace dpkit::optim
