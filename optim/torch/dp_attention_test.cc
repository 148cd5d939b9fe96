#include "dpkit/optim/torch/dp_attention.h"

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;

// A one-block transformer encoder classifier over token sequences, token 0 = padding:
// embedding, self-attention (padded keys masked, optionally causal), residual + LayerNorm,
// a position-wise Linear, mean over the real positions, a Linear head.
struct TinyEncoder : torch::nn::Module {
  DpEmbedding embedding{nullptr};
  DpMultiheadAttention attention{nullptr};
  DpLayerNorm norm{nullptr};
  DpLinear feed_forward{nullptr}, head{nullptr};
  bool causal;
  explicit TinyEncoder(bool causal_attention) : causal(causal_attention) {
    embedding = register_module("embedding", DpEmbedding(12, 8));
    attention = register_module("attention", DpMultiheadAttention(8, 2));
    norm = register_module("norm", DpLayerNorm(std::vector<int64_t>{8}));
    feed_forward = register_module("feed_forward", DpLinear(8, 8));
    head = register_module("head", DpLinear(8, 3));
  }
  // The DP layers (reference false) or plain LibTorch ops on the same parameters.
  torch::Tensor Run(const torch::Tensor& tokens, bool reference) {
    torch::Tensor pad = tokens.eq(0);
    auto linear = [&](DpLinear& l, const torch::Tensor& x) {
      return reference ? F::linear(x, l->weight, l->bias) : l(x);
    };
    torch::Tensor h = reference ? F::embedding(tokens, embedding->weight) : embedding(tokens);
    torch::Tensor attended;
    if (reference) {
      DpMultiheadAttentionImpl& a = *attention;
      std::vector<torch::Tensor> qkv = linear(a.in_proj, h).chunk(3, -1);
      attended =
          linear(a.out_proj, MultiHeadAttention(qkv[0], qkv[1], qkv[2], 2, pad, causal));
    } else {
      attended = attention(h, pad, causal);
    }
    h = reference ? torch::layer_norm(h + attended, {8}, norm->weight, norm->bias)
                  : norm(h + attended);
    h = torch::tanh(linear(feed_forward, h));
    torch::Tensor real = (~pad).to(h.scalar_type()).unsqueeze(-1);
    return linear(head, (h * real).sum(1) / real.sum(1));
  }
};

// Five sequences of length 6 with 6, 4, 3, 1 and 5 real tokens (repeated tokens included).
torch::Tensor PaddedTokens() {
  return torch::tensor({{3, 5, 3, 3, 7, 11}, {2, 2, 9, 4, 0, 0}, {1, 6, 1, 0, 0, 0},
                        {8, 0, 0, 0, 0, 0}, {10, 4, 4, 10, 5, 0}},
                       torch::kLong);
}

void CheckEncoder(bool causal) {
  torch::manual_seed(causal ? 2 : 1);
  auto net = std::make_shared<TinyEncoder>(causal);
  net->to(torch::kFloat64);
  TestModel model = ModelFromBody(
      net, [net](const torch::Tensor& x, bool reference) { return net->Run(x, reference); });
  CheckAgainstLoop(model, PaddedTokens(), torch::tensor({0, 2, 1, 1, 0}, torch::kLong));
}

TEST(DpAttentionTest, EncoderWithPaddingMasksMatchesBatchSizeOneLoop) { CheckEncoder(false); }

TEST(DpAttentionTest, CausalEncoderWithPaddingMasksMatchesBatchSizeOneLoop) {
  CheckEncoder(true);
}

TEST(DpAttentionTest, PaddingGetsNoGradient) {
  torch::manual_seed(3);
  TinyEncoder net(false);
  PerExampleLoss(net.Run(PaddedTokens(), false), torch::tensor({0, 2, 1, 1, 0}, torch::kLong))
      .sum()
      .backward();
  // Row 0 of the embedding (the padding token) of every example: nothing reaches the loss.
  torch::Tensor per_example = net.embedding->PerExampleGradients()[0];
  EXPECT_EQ(per_example.select(1, 0).abs().max().item<float>(), 0.0f);
  EXPECT_GT(per_example.select(1, 3).abs().max().item<float>(), 0.0f);
}

TEST(DpAttentionTest, ModelCheckAcceptsItAsTwoLinearLayers) {
  TinyEncoder net(false);
  std::vector<NamedPerExampleLayer> layers;
  ASSERT_TRUE(ValidateForPerExampleGradients(net, &layers).ok());
  ASSERT_EQ(layers.size(), 6u);
  EXPECT_EQ(layers[1].name, "attention.in_proj");
  EXPECT_EQ(layers[2].name, "attention.out_proj");
}

TEST(DpAttentionTest, RejectsEmbedDimNotMultipleOfHeads) {
  EXPECT_THROW(DpMultiheadAttention(6, 4), c10::Error);
}

}  // namespace
}  // namespace dpkit::optim
