#include "dpkit/optim/torch/dp_attention.h"

#include <memory>
#include <tuple>
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
  EXPECT_THROW(DpTorchMultiheadAttention(6, 4), c10::Error);
}

namespace nn = torch::nn;
using AttentionOutput = std::tuple<torch::Tensor, torch::Tensor>;

// torch::nn::MultiheadAttention's options that change its parameters or forward.
std::vector<nn::MultiheadAttentionOptions> TorchConfigurations() {
  return {
      nn::MultiheadAttentionOptions(8, 2),
      nn::MultiheadAttentionOptions(8, 4).bias(false),
      nn::MultiheadAttentionOptions(8, 2).add_bias_kv(true).add_zero_attn(true),
      nn::MultiheadAttentionOptions(8, 2).kdim(5).vdim(5),
      nn::MultiheadAttentionOptions(8, 2).kdim(5).vdim(5).bias(false).add_bias_kv(true),
  };
}

TEST(DpTorchAttentionTest, HasTorchsParametersInitialisationAndOutputsBitForBit) {
  for (const nn::MultiheadAttentionOptions& options : TorchConfigurations()) {
    torch::manual_seed(1);
    nn::MultiheadAttention torch_attention(options);
    torch::manual_seed(1);
    DpTorchMultiheadAttention dp(options);
    SCOPED_TRACE(::testing::Message() << "kdim " << options.kdim() << " bias " << options.bias()
                                      << " bias_kv " << options.add_bias_kv());
    ASSERT_EQ(dp->named_parameters().keys(), torch_attention->named_parameters().keys());
    for (const auto& p : torch_attention->named_parameters()) {
      EXPECT_TRUE(torch::equal(dp->named_parameters()[p.key()], p.value())) << p.key();
    }
    const int64_t kdim = options.kdim();
    torch::Tensor x = torch::randn({6, 3, 8});  // (L, B, E)
    torch::Tensor memory = torch::randn({7, 3, kdim});
    torch::Tensor other = torch::randn({7, 3, kdim});
    torch::Tensor pad = torch::zeros({3, 7}, torch::kBool);
    pad[1].narrow(0, 4, 3).fill_(true);
    torch::Tensor mask = torch::randn({6, 7});
    // Self-attention (one projection of all rows; kdim = E only), encoder-decoder
    // (key = value), and three different inputs; masks, weights per head or averaged.
    std::vector<std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>> inputs = {
        {x, memory, memory}, {x, memory, other}};
    if (kdim == 8) inputs.emplace_back(x, x, x);
    for (const auto& [q, k, v] : inputs) {
      const bool self = q.size(0) == k.size(0);
      torch::Tensor key_pad = self ? torch::Tensor() : pad;
      torch::Tensor attn_mask = self ? torch::Tensor() : mask;
      for (bool average : {true, false}) {
        AttentionOutput want = torch_attention->forward(q, k, v, key_pad, true, attn_mask, average);
        AttentionOutput got = dp->forward(q, k, v, key_pad, true, attn_mask, average);
        EXPECT_TRUE(torch::equal(std::get<0>(got), std::get<0>(want)));
        EXPECT_TRUE(torch::equal(std::get<1>(got), std::get<1>(want)));
      }
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(torch::equal(std::get<0>(dp->forward(q, k, v, key_pad, false)),
                               std::get<0>(torch_attention->forward(q, k, v, key_pad, false))));
    }
  }
}

TEST(DpTorchAttentionTest, DropoutOnTheWeightsDrawsAsTorchDoes) {
  auto options = nn::MultiheadAttentionOptions(8, 2).dropout(0.25);
  nn::MultiheadAttention torch_attention(options);
  DpTorchMultiheadAttention dp(options);
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : torch_attention->named_parameters()) {
      dp->named_parameters()[p.key()].copy_(p.value());
    }
  }
  torch::Tensor x = torch::randn({5, 4, 8});
  torch::manual_seed(9);
  AttentionOutput want = torch_attention->forward(x, x, x);
  torch::manual_seed(9);
  AttentionOutput got = dp->forward(x, x, x);
  EXPECT_TRUE(torch::equal(std::get<0>(got), std::get<0>(want)));
  EXPECT_TRUE(torch::equal(std::get<1>(got), std::get<1>(want)));
}

// Token sequences (0 = padding) through an embedding, torch's attention (or its DP twin) in
// one of three uses, a mean over the query positions and a Linear head. The reference calls
// LibTorch's own F::detail::multi_head_attention_forward on the same parameters.
enum class Use { kSelf, kEncoderDecoder, kSeparateInputs };
struct TorchAttentionNet : nn::Module {
  DpEmbedding embedding{nullptr};
  DpTorchMultiheadAttention attention{nullptr};
  DpLinear memory{nullptr}, head{nullptr};
  Use use;
  TorchAttentionNet(const nn::MultiheadAttentionOptions& options, Use use) : use(use) {
    embedding = register_module("embedding", DpEmbedding(12, 8));
    attention = register_module("attention", DpTorchMultiheadAttention(options));
    memory = register_module("memory", DpLinear(8, options.kdim()));
    head = register_module("head", DpLinear(8, 3));
  }
  torch::Tensor Run(const torch::Tensor& tokens, bool reference) {
    auto linear = [&](DpLinear& l, const torch::Tensor& x) {
      return reference ? F::linear(x, l->weight, l->bias) : l(x);
    };
    torch::Tensor pad = tokens.eq(0);
    torch::Tensor h = reference ? F::embedding(tokens, embedding->weight) : embedding(tokens);
    torch::Tensor x = h.transpose(0, 1);               // (T, B, E)
    torch::Tensor m = torch::tanh(linear(memory, h)).transpose(0, 1);  // (T, B, kdim)
    torch::Tensor q = m, k = m, v = m;  // self-attention: kdim = E
    if (use == Use::kEncoderDecoder) q = x.narrow(0, 0, 4), k = m, v = m;
    if (use == Use::kSeparateInputs) q = x, k = m, v = m * m;
    // A fixed additive mask (L, S), finite so that no row is all -inf.
    torch::Tensor attn_mask =
        0.3 * (torch::arange(q.size(0), x.options()).view({-1, 1}) -
               torch::arange(k.size(0), x.options()).view({1, -1}));
    const nn::MultiheadAttentionOptions& o = attention->options();
    DpTorchMultiheadAttentionImpl& a = *attention;
    torch::Tensor out;
    if (reference) {
      out = std::get<0>(F::detail::multi_head_attention_forward(
          q, k, v, 8, o.num_heads(), a.in_proj_weight, a.in_proj_bias, a.bias_k, a.bias_v,
          o.add_zero_attn(), 0.0, a.out_proj->weight, a.out_proj->bias, true, pad, false,
          attn_mask, o.kdim() != 8, a.q_proj_weight, a.k_proj_weight, a.v_proj_weight));
    } else {
      out = std::get<0>(attention(q, k, v, pad, false, attn_mask));
    }
    return linear(head, torch::tanh(out).mean(0));
  }
};

void CheckTorchAttention(const nn::MultiheadAttentionOptions& options, Use use, int seed) {
  torch::manual_seed(seed);
  auto net = std::make_shared<TorchAttentionNet>(options, use);
  net->to(torch::kFloat64);
  if (options.bias()) {
    // Non-zero biases (torch initialises them to 0) so their gradients are generic.
    torch::NoGradGuard no_grad;
    net->attention->in_proj_bias.uniform_(-0.5, 0.5);
    net->attention->out_proj->bias.uniform_(-0.5, 0.5);
  }
  TestModel model = ModelFromBody(
      net, [raw = net.get()](const torch::Tensor& x, bool reference) {
        return raw->Run(x, reference);
      });
  CheckAgainstLoop(model, PaddedTokens(), torch::tensor({0, 2, 1, 1, 0}, torch::kLong));
}

TEST(DpTorchAttentionTest, SelfAttentionWithMasksBiasKvAndZeroAttentionMatchesTheLoop) {
  CheckTorchAttention(nn::MultiheadAttentionOptions(8, 2).add_bias_kv(true).add_zero_attn(true),
                      Use::kSelf, 4);
  CheckTorchAttention(nn::MultiheadAttentionOptions(8, 4).bias(false), Use::kSelf, 5);
}

TEST(DpTorchAttentionTest, EncoderDecoderAttentionMatchesTheLoop) {
  CheckTorchAttention(nn::MultiheadAttentionOptions(8, 2), Use::kEncoderDecoder, 6);
}

TEST(DpTorchAttentionTest, SeparateProjectionWeightsMatchTheLoop) {
  CheckTorchAttention(nn::MultiheadAttentionOptions(8, 2).kdim(5).vdim(5).add_bias_kv(true),
                      Use::kSeparateInputs, 7);
  CheckTorchAttention(nn::MultiheadAttentionOptions(8, 2), Use::kSeparateInputs, 8);
}

TEST(DpTorchAttentionTest, ModelCheckSeesTheAttentionAndItsOutputProjection) {
  TorchAttentionNet net(nn::MultiheadAttentionOptions(8, 2).add_bias_kv(true), Use::kSelf);
  std::vector<NamedPerExampleLayer> layers;
  ASSERT_TRUE(ValidateForPerExampleGradients(net, &layers).ok());
  ASSERT_EQ(layers.size(), 5u);
  EXPECT_EQ(layers[1].name, "attention");
  EXPECT_EQ(layers[1].layer->DpParameters().size(), 4u);  // in_proj_weight, bias, bias_k, bias_v
  EXPECT_EQ(layers[2].name, "attention.out_proj");
}

}  // namespace
}  // namespace dpkit::optim
