// MakePrivate on recurrent models: torch::nn::LSTM / GRU replaced by DpLSTM / DpGRU sharing
// their parameter tensors (make_private.h, dp_rnn.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/make_private.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace nn = torch::nn;
using LstmOutput = std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>>;

// A user's own sequence classifier: token embeddings and a 2-layer LSTM in a Sequential (the
// LSTM last, so the Sequential returns its (output, (h_n, c_n))), a head on the last layer's
// final state; every layer is reached through the module tree at call time.
struct UserTagger : nn::Module {
  nn::Sequential encoder{nullptr}, head{nullptr};
  UserTagger() {
    encoder = register_module(
        "encoder", nn::Sequential(nn::Embedding(12, 5),
                                  nn::LSTM(nn::LSTMOptions(5, 6).num_layers(2).batch_first(true))));
    head = register_module("head", nn::Sequential(nn::Tanh(), nn::Linear(6, 3)));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor h_n = std::get<0>(std::get<1>(encoder->forward<LstmOutput>(tokens)));
    return head->forward(h_n.select(0, h_n.size(0) - 1));
  }
};

std::map<std::string, torch::TensorImpl*> ParameterImpls(nn::Module& m) {
  std::map<std::string, torch::TensorImpl*> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().unsafeGetTensorImpl();
  return out;
}

TEST(MakePrivateRnnTest, ReplacesAnLstmKeepingParameterTensorsAndOutputsBitForBit) {
  torch::manual_seed(1);
  UserTagger net;
  torch::Tensor tokens = torch::randint(0, 12, {4, 7}, torch::kLong);
  torch::Tensor before = net.forward(tokens);
  std::map<std::string, torch::TensorImpl*> impls = ParameterImpls(net);
  ASSERT_TRUE(ConvertToPerExample(net).ok());
  EXPECT_EQ(ParameterImpls(net), impls);  // same names (weight_ih_l0, ...), same tensors
  EXPECT_NE(net.encoder[1]->as<DpLSTMImpl>(), nullptr);
  EXPECT_TRUE(torch::equal(net.forward(tokens), before));
  std::vector<NamedPerExampleLayer> layers;
  ASSERT_TRUE(ValidateForPerExampleGradients(net, &layers).ok());
  EXPECT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[1].name, "encoder.1");
}

TEST(MakePrivateRnnTest, ReplacesAGruKeepingItsOutputs) {
  torch::manual_seed(2);
  nn::Sequential seq(nn::GRU(nn::GRUOptions(3, 4).num_layers(2)));
  torch::Tensor x = torch::randn({5, 2, 3});
  auto before = seq->forward<std::tuple<torch::Tensor, torch::Tensor>>(x);
  ASSERT_TRUE(ConvertToPerExample(*seq).ok());
  EXPECT_NE(seq[0]->as<DpGRUImpl>(), nullptr);
  auto after = seq->forward<std::tuple<torch::Tensor, torch::Tensor>>(x);
  EXPECT_TRUE(torch::equal(std::get<0>(after), std::get<0>(before)));
  EXPECT_TRUE(torch::equal(std::get<1>(after), std::get<1>(before)));
}

TEST(MakePrivateRnnTest, ReplacesBidirectionalProjectedBiasFreeAndSimpleRecurrentLayers) {
  torch::manual_seed(5);
  nn::Sequential lstm(
      nn::LSTM(nn::LSTMOptions(3, 5).num_layers(2).bidirectional(true).proj_size(2)));
  nn::Sequential gru(nn::GRU(nn::GRUOptions(3, 4).bias(false).bidirectional(true)));
  nn::Sequential rnn(nn::RNN(nn::RNNOptions(3, 4).nonlinearity(torch::kReLU).num_layers(2)));
  torch::Tensor x = torch::randn({6, 2, 3});
  using Pair = std::tuple<torch::Tensor, torch::Tensor>;
  auto lstm_before = lstm->forward<std::tuple<torch::Tensor, Pair>>(x);
  auto gru_before = gru->forward<Pair>(x);
  auto rnn_before = rnn->forward<Pair>(x);
  std::map<std::string, torch::TensorImpl*> impls = ParameterImpls(*lstm);
  ASSERT_TRUE(ConvertToPerExample(*lstm).ok());
  ASSERT_TRUE(ConvertToPerExample(*gru).ok());
  ASSERT_TRUE(ConvertToPerExample(*rnn).ok());
  EXPECT_EQ(ParameterImpls(*lstm), impls);  // weight_hr_l1_reverse, ... the same tensors
  EXPECT_NE(lstm[0]->as<DpLSTMImpl>(), nullptr);
  EXPECT_NE(gru[0]->as<DpGRUImpl>(), nullptr);
  EXPECT_NE(rnn[0]->as<DpRNNImpl>(), nullptr);
  auto lstm_after = lstm->forward<std::tuple<torch::Tensor, Pair>>(x);
  EXPECT_TRUE(torch::equal(std::get<0>(lstm_after), std::get<0>(lstm_before)));
  EXPECT_TRUE(torch::equal(std::get<0>(std::get<1>(lstm_after)),
                           std::get<0>(std::get<1>(lstm_before))));
  EXPECT_TRUE(torch::equal(std::get<0>(gru->forward<Pair>(x)), std::get<0>(gru_before)));
  EXPECT_TRUE(torch::equal(std::get<1>(rnn->forward<Pair>(x)), std::get<1>(rnn_before)));
}

// The documented alternative to a plain member holder (make_private.h): a member Sequential
// holding one layer, called with the layer's own arguments, is redirected.
struct SequentialMember : nn::Module {
  nn::Sequential lstm{nullptr};
  SequentialMember() { lstm = register_module("lstm", nn::Sequential(nn::LSTM(3, 4))); }
  torch::Tensor forward(const torch::Tensor& x,
                        const std::tuple<torch::Tensor, torch::Tensor>& hx) {
    // AnyModule checks argument types exactly: the LSTM's second argument is an optional.
    using State = torch::optional<std::tuple<torch::Tensor, torch::Tensor>>;
    return std::get<0>(lstm->forward<LstmOutput>(x, State(hx))).sum(0);
  }
};

TEST(MakePrivateRnnTest, AOneLayerSequentialMemberIsRedirected) {
  torch::manual_seed(4);
  SequentialMember net;
  torch::Tensor x = torch::randn({6, 2, 3});
  std::tuple<torch::Tensor, torch::Tensor> hx = {torch::randn({1, 2, 4}),
                                                 torch::randn({1, 2, 4})};
  torch::Tensor before = net.forward(x, hx);
  ASSERT_TRUE(ConvertToPerExample(net).ok());
  torch::Tensor after = net.forward(x, hx);
  EXPECT_TRUE(torch::equal(after, before));
  after.sum().backward();  // the guard hooks stay silent: the DpLSTM ran
  EXPECT_TRUE(net.lstm[0]->as<DpLSTMImpl>()->HasCapture());
}

TEST(MakePrivateRnnTest, DpStepEqualsTheHandComputedClippedStep) {
  torch::manual_seed(3);
  UserTagger net, plain;  // `plain` stays a torch::nn model: ordinary autograd per example
  net.to(torch::kFloat64);
  plain.to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    auto target = plain.named_parameters();
    for (const auto& p : net.named_parameters()) target[p.key()].copy_(p.value());
  }
  const double lr = 0.5, clip = 0.3;
  const int64_t batch = 5;
  torch::Tensor tokens = torch::randint(0, 12, {batch, 6}, torch::kLong);
  torch::Tensor labels = torch::tensor({0, 2, 1, 1, 0}, torch::kLong);
  // Hand-computed: each example's gradient by autograd, clipped to norm C, summed, / B.
  std::vector<std::string> names = plain.named_parameters().keys();
  std::vector<torch::Tensor> params = plain.parameters(), update;
  for (const torch::Tensor& p : params) update.push_back(torch::zeros_like(p));
  for (int64_t i = 0; i < batch; ++i) {
    torch::Tensor loss =
        PerExampleLoss(plain.forward(tokens.narrow(0, i, 1)), labels.narrow(0, i, 1)).sum();
    std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, params);
    double squared = 0;
    for (const torch::Tensor& g : grads) squared += g.pow(2).sum().item<double>();
    const double norm = std::sqrt(squared);
    const double factor = norm > clip ? clip / norm : 1.0;
    for (size_t k = 0; k < grads.size(); ++k) update[k] += grads[k] * (lr * factor / batch);
  }
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : net.named_parameters()) before[p.key()] = p.value().clone();

  MakePrivateOptions options;
  options.noise_multiplier = 0;  // deterministic: clipping and averaging only
  options.max_grad_norm = clip;
  options.dataset_size = 50;
  options.expected_batch_size = batch;
  auto training =
      MakePrivate(net, std::make_unique<torch::optim::SGD>(net.parameters(), lr), options);
  ASSERT_TRUE(training.ok()) << training.status();
  PerExampleLoss(net.forward(tokens), labels).sum().backward();
  ASSERT_TRUE((*training)->Step().ok());
  for (size_t k = 0; k < names.size(); ++k) {
    torch::Tensor applied = before[names[k]] - net.named_parameters()[names[k]];
    // float64 throughout: the two computations differ by rounding (~1e-15 relative).
    EXPECT_LT(RelativeError(applied, update[k]), 1e-10) << names[k];
  }
  // At least one example was clipped, so the test exercises the clip factors.
  const std::vector<double>& norms = (*training)->optimizer().last_norms();
  EXPECT_GT(*std::max_element(norms.begin(), norms.end()), clip);
}

}  // namespace
}  // namespace dpkit::optim
