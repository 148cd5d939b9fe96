#include "dpkit/optim/torch/dp_embedding.h"

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

struct EmbeddingNet : torch::nn::Module {
  DpEmbedding embedding{nullptr};
  DpLayerNorm norm{nullptr};
  DpLinear fc{nullptr};
  EmbeddingNet() {
    embedding = register_module("embedding", DpEmbedding(7, 4));
    norm = register_module("norm", DpLayerNorm(std::vector<int64_t>{4}));
    fc = register_module("fc", DpLinear(4, 3));
  }
};

TEST(DpEmbeddingTest, EmbeddingAndLayerNormMatchBatchSizeOneLoop) {
  torch::manual_seed(4);
  auto net = std::make_shared<EmbeddingNet>();
  net->to(torch::kFloat64);
  { torch::NoGradGuard guard; net->norm->weight.uniform_(0.5, 1.5); net->norm->bias.uniform_(-1, 1); }
  auto body = [&](const torch::Tensor& x, bool reference) {
    torch::Tensor h = reference ? torch::embedding(net->embedding->weight, x) : net->embedding(x);
    h = reference ? torch::layer_norm(h, {4}, net->norm->weight, net->norm->bias) : net->norm(h);
    h = torch::relu(h).mean(1);
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  // Indices in [0, 7) over 6 positions: repeated rows within an example are certain.
  CheckAgainstLoop(model, torch::randint(0, 7, {5, 6}, torch::kLong),
                   torch::randint(0, 3, {5}, torch::kLong));
}

TEST(DpEmbeddingTest, SingleIndexEmbeddingMatchesBatchSizeOneLoop) {
  torch::manual_seed(5);
  auto net = std::make_shared<EmbeddingNet>();
  net->to(torch::kFloat64);
  auto body = [&](const torch::Tensor& x, bool reference) {
    torch::Tensor h = reference ? torch::embedding(net->embedding->weight, x) : net->embedding(x);
    h = reference ? torch::layer_norm(h, {4}, net->norm->weight, net->norm->bias) : net->norm(h);
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  CheckAgainstLoop(model, torch::tensor({0, 3, 3, 6}, torch::kLong),
                   torch::randint(0, 3, {4}, torch::kLong));
}

}  // namespace
}  // namespace dpkit::optim
