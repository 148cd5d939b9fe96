#include "dpkit/optim/torch/dp_rnn.h"

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;
namespace nn = torch::nn;
namespace rnn = torch::nn::utils::rnn;

// Copies `from`'s parameters into `to` by name (both must have the same names and shapes).
void CopyParameters(nn::Module& from, nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto target = to.named_parameters();
  ASSERT_EQ(from.named_parameters().size(), target.size());
  for (const auto& p : from.named_parameters()) {
    ASSERT_NE(target.find(p.key()), nullptr) << p.key();
    target[p.key()].copy_(p.value());
  }
}

std::vector<std::string> Names(nn::Module& m) { return m.named_parameters().keys(); }

DpRnnOptions Options(int64_t in, int64_t hidden, int64_t layers, bool batch_first,
                     bool bidirectional = false, int64_t proj_size = 0, bool bias = true) {
  DpRnnOptions o(in, hidden);
  o.num_layers = layers;
  o.batch_first = batch_first;
  o.bidirectional = bidirectional;
  o.proj_size = proj_size;
  o.bias = bias;
  return o;
}

// Same names in the same order, same shapes, and from the same seed the same values.
void ExpectSameParameters(nn::Module& torch_module, nn::Module& dp) {
  EXPECT_EQ(Names(torch_module), Names(dp));
  for (const auto& p : torch_module.named_parameters()) {
    ASSERT_NE(dp.named_parameters().find(p.key()), nullptr) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), dp.named_parameters()[p.key()])) << p.key();
  }
}

TEST(DpRnnTest, ParametersAreNamedAndShapedAsTorchs) {
  nn::LSTM lstm(nn::LSTMOptions(5, 7).num_layers(2));
  DpLSTMImpl dp_lstm(Options(5, 7, 2, false));
  EXPECT_EQ(Names(*lstm), Names(dp_lstm));
  for (const auto& p : lstm->named_parameters()) {
    EXPECT_EQ(p.value().sizes(), dp_lstm.named_parameters()[p.key()].sizes()) << p.key();
  }
  nn::GRU gru(nn::GRUOptions(5, 7));
  DpGRUImpl dp_gru(5, 7);
  EXPECT_EQ(Names(*gru), Names(dp_gru));
  EXPECT_EQ(gru->named_parameters()["weight_ih_l0"].sizes(), dp_gru.weight_ih[0].sizes());
  // The same initialisation from the same seed (torch's order and bounds).
  torch::manual_seed(3);
  nn::LSTM seeded(nn::LSTMOptions(4, 6));
  torch::manual_seed(3);
  DpLSTM dp_seeded(4, 6);
  for (const auto& p : seeded->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), dp_seeded->named_parameters()[p.key()])) << p.key();
  }
}

TEST(DpRnnTest, BidirectionalProjectedAndBiasFreeLayersAreNamedAndInitialisedAsTorchs) {
  torch::manual_seed(7);
  nn::LSTM lstm(nn::LSTMOptions(5, 7).num_layers(2).bidirectional(true).proj_size(3));
  torch::manual_seed(7);
  DpLSTM dp_lstm(Options(5, 7, 2, false, true, 3));
  ExpectSameParameters(*lstm, *dp_lstm);  // weight_hr_l0, weight_ih_l1_reverse (6 inputs), ...
  EXPECT_EQ(dp_lstm->weight_ih[2].sizes(), torch::IntArrayRef({28, 6}));
  torch::manual_seed(8);
  nn::GRU gru(nn::GRUOptions(4, 6).bidirectional(true).bias(false));
  torch::manual_seed(8);
  DpGRU dp_gru(Options(4, 6, 1, false, true, 0, false));
  ExpectSameParameters(*gru, *dp_gru);
  torch::manual_seed(9);
  nn::RNN rnn(nn::RNNOptions(4, 6).num_layers(2).nonlinearity(torch::kReLU).bidirectional(true));
  torch::manual_seed(9);
  DpRNN dp_rnn(Options(4, 6, 2, false, true), /*relu=*/true);
  ExpectSameParameters(*rnn, *dp_rnn);
}

TEST(DpRnnTest, LstmForwardEqualsTorchLstmBitForBit) {
  torch::manual_seed(1);
  for (bool batch_first : {false, true}) {
    nn::LSTM lstm(nn::LSTMOptions(5, 7).num_layers(2).batch_first(batch_first));
    DpLSTM dp(Options(5, 7, 2, batch_first));
    CopyParameters(*lstm, *dp);
    torch::Tensor x = torch::randn({4, 6, 5});  // (B, T) or (T, B)
    auto want = lstm->forward(x);
    auto got = dp->forward(x);  // grad mode: through the per-example projections
    EXPECT_TRUE(torch::equal(std::get<0>(got), std::get<0>(want)));
    EXPECT_TRUE(torch::equal(std::get<0>(std::get<1>(got)), std::get<0>(std::get<1>(want))));
    EXPECT_TRUE(torch::equal(std::get<1>(std::get<1>(got)), std::get<1>(std::get<1>(want))));
    // Given initial states, and without autograd.
    const int64_t batch = batch_first ? 4 : 6;
    std::tuple<torch::Tensor, torch::Tensor> hx = {torch::randn({2, batch, 7}),
                                                   torch::randn({2, batch, 7})};
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(std::get<0>(dp->forward(x, hx)), std::get<0>(lstm->forward(x, hx))));
    EXPECT_FALSE(dp->HasCapture());
  }
}

TEST(DpRnnTest, BidirectionalProjectedLstmForwardEqualsTorchsBitForBit) {
  torch::manual_seed(11);
  for (bool batch_first : {false, true}) {
    nn::LSTM lstm(nn::LSTMOptions(5, 7).num_layers(2).batch_first(batch_first).bidirectional(true)
                      .proj_size(4));
    DpLSTM dp(Options(5, 7, 2, batch_first, true, 4));
    CopyParameters(*lstm, *dp);
    torch::Tensor x = torch::randn({3, 6, 5});
    const int64_t batch = batch_first ? 3 : 6;
    std::tuple<torch::Tensor, torch::Tensor> hx = {torch::randn({4, batch, 4}),
                                                   torch::randn({4, batch, 7})};
    for (bool given : {false, true}) {
      auto want = given ? lstm->forward(x, hx) : lstm->forward(x);
      auto got = given ? dp->forward(x, hx) : dp->forward(x);
      EXPECT_TRUE(torch::equal(std::get<0>(got), std::get<0>(want)));
      EXPECT_TRUE(torch::equal(std::get<0>(std::get<1>(got)), std::get<0>(std::get<1>(want))));
      EXPECT_TRUE(torch::equal(std::get<1>(std::get<1>(got)), std::get<1>(std::get<1>(want))));
    }
  }
}

TEST(DpRnnTest, BidirectionalGruAndRnnForwardsEqualTorchsBitForBit) {
  torch::manual_seed(12);
  nn::GRU gru(nn::GRUOptions(3, 5).num_layers(2).bidirectional(true).bias(false));
  DpGRU dp_gru(Options(3, 5, 2, false, true, 0, false));
  CopyParameters(*gru, *dp_gru);
  torch::Tensor x = torch::randn({7, 4, 3});
  torch::Tensor h0 = torch::randn({4, 4, 5});
  auto want = gru->forward(x, h0);
  auto got = dp_gru->forward(x, h0);
  EXPECT_TRUE(torch::equal(std::get<0>(got), std::get<0>(want)));
  EXPECT_TRUE(torch::equal(std::get<1>(got), std::get<1>(want)));
  for (bool relu : {false, true}) {
    nn::RNN rnn(nn::RNNOptions(3, 5).num_layers(2).bidirectional(true).batch_first(true)
                    .nonlinearity(relu ? nn::RNNOptions::nonlinearity_t(torch::kReLU)
                                       : nn::RNNOptions::nonlinearity_t(torch::kTanh)));
    DpRNN dp_rnn(Options(3, 5, 2, true, true), relu);
    CopyParameters(*rnn, *dp_rnn);
    auto rnn_want = rnn->forward(x);
    auto rnn_got = dp_rnn->forward(x);
    EXPECT_TRUE(torch::equal(std::get<0>(rnn_got), std::get<0>(rnn_want))) << relu;
    EXPECT_TRUE(torch::equal(std::get<1>(rnn_got), std::get<1>(rnn_want))) << relu;
  }
}

TEST(DpRnnTest, GruForwardEqualsTorchGruBitForBit) {
  torch::manual_seed(2);
  nn::GRU gru(nn::GRUOptions(3, 8).num_layers(3).batch_first(true));
  DpGRU dp(Options(3, 8, 3, true));
  CopyParameters(*gru, *dp);
  torch::Tensor x = torch::randn({5, 9, 3});
  torch::Tensor h0 = torch::randn({3, 5, 8});
  auto want = gru->forward(x, h0);
  auto got = dp->forward(x, h0);
  EXPECT_TRUE(torch::equal(std::get<0>(got), std::get<0>(want)));
  EXPECT_TRUE(torch::equal(std::get<1>(got), std::get<1>(want)));
}

TEST(DpRnnTest, PaddedForwardEqualsTorchsPackedSequences) {
  torch::manual_seed(3);
  nn::LSTM lstm(nn::LSTMOptions(4, 5).num_layers(2).batch_first(true));
  nn::GRU gru(nn::GRUOptions(4, 5).batch_first(true));
  DpLSTM dp_lstm(Options(4, 5, 2, true));
  DpGRU dp_gru(Options(4, 5, 1, true));
  CopyParameters(*lstm, *dp_lstm);
  CopyParameters(*gru, *dp_gru);
  lstm->to(torch::kFloat64), dp_lstm->to(torch::kFloat64);
  gru->to(torch::kFloat64), dp_gru->to(torch::kFloat64);
  torch::Tensor x = torch::randn({4, 6, 4}, torch::kFloat64);
  torch::Tensor lengths = torch::tensor({6, 2, 4, 1}, torch::kLong);
  rnn::PackedSequence packed = rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true,
                                                         /*enforce_sorted=*/false);
  auto [packed_out, state] = lstm->forward_with_packed_input(packed);
  torch::Tensor want = std::get<0>(rnn::pad_packed_sequence(packed_out, /*batch_first=*/true));
  auto got = dp_lstm->forward_with_lengths(x, lengths);
  // The packed path runs each step on the examples still running (other GEMM shapes): float64
  // rounding only.
  EXPECT_LT(RelativeError(std::get<0>(got), want), 1e-12);
  EXPECT_LT(RelativeError(std::get<0>(std::get<1>(got)), std::get<0>(state)), 1e-12);
  EXPECT_LT(RelativeError(std::get<1>(std::get<1>(got)), std::get<1>(state)), 1e-12);
  auto [gru_packed_out, gru_state] = gru->forward_with_packed_input(packed);
  auto gru_got = dp_gru->forward_with_lengths(x, lengths);
  EXPECT_LT(RelativeError(std::get<0>(gru_got),
                          std::get<0>(rnn::pad_packed_sequence(gru_packed_out, true))),
            1e-12);
  EXPECT_LT(RelativeError(std::get<1>(gru_got), gru_state), 1e-12);
  // Bidirectional with projections: the reverse direction starts at each example's last
  // step, as packed sequences do.
  nn::LSTM bi(nn::LSTMOptions(4, 5).num_layers(2).batch_first(true).bidirectional(true)
                  .proj_size(3));
  DpLSTM dp_bi(Options(4, 5, 2, true, true, 3));
  CopyParameters(*bi, *dp_bi);
  bi->to(torch::kFloat64), dp_bi->to(torch::kFloat64);
  auto [bi_packed_out, bi_state] = bi->forward_with_packed_input(packed);
  auto bi_got = dp_bi->forward_with_lengths(x, lengths);
  EXPECT_LT(RelativeError(std::get<0>(bi_got),
                          std::get<0>(rnn::pad_packed_sequence(bi_packed_out, true))),
            1e-12);
  EXPECT_LT(RelativeError(std::get<0>(std::get<1>(bi_got)), std::get<0>(bi_state)), 1e-12);
  EXPECT_LT(RelativeError(std::get<1>(std::get<1>(bi_got)), std::get<1>(bi_state)), 1e-12);
}

// A recurrent classifier over padded sequences: inputs (B, T, in + 1) whose last feature holds
// the example's length (so the batch-size-1 loop sees it too); logits from the last layer's
// final state(s) and the sum of the outputs. The reference runs torch::lstm / gru / rnn_tanh /
// rnn_relu on the example's first `length` steps.
enum class Kind { kLstm, kGru, kRnnTanh, kRnnRelu };
struct RecurrentNet : nn::Module {
  std::shared_ptr<DpRecurrentBase> rnn;
  DpLinear fc{nullptr};
  Kind kind;
  RecurrentNet(Kind kind, const DpRnnOptions& o) : kind(kind) {
    if (kind == Kind::kLstm) {
      rnn = register_module("rnn", std::make_shared<DpLSTMImpl>(o));
    } else if (kind == Kind::kGru) {
      rnn = register_module("rnn", std::make_shared<DpGRUImpl>(o));
    } else {
      rnn = register_module("rnn", std::make_shared<DpRNNImpl>(o, kind == Kind::kRnnRelu));
    }
    const int64_t out = o.proj_size > 0 ? o.proj_size : o.hidden_size;
    fc = register_module("fc", DpLinear(out * (o.bidirectional ? 4 : 2), 3));
  }
  // The reference calls plain F::linear on fc's parameters (DpLinear's forward gives its
  // parameters no ordinary gradient). Features: the last layer's final states (both
  // directions) and the outputs summed over time.
  torch::Tensor Head(const torch::Tensor& output, const torch::Tensor& h_n, bool reference) {
    const int64_t d = rnn->directions();
    torch::Tensor last = h_n.narrow(0, h_n.size(0) - d, d).transpose(0, 1).flatten(1);
    torch::Tensor features = torch::tanh(torch::cat({last, output.sum(1)}, 1));
    return reference ? F::linear(features, fc->weight, fc->bias) : fc(features);
  }
  torch::Tensor Forward(const torch::Tensor& x, bool reference) {
    const int64_t in = x.size(2) - 1;
    torch::Tensor features = x.narrow(2, 0, in);
    torch::Tensor lengths = x.select(2, in).select(1, 0).to(torch::kLong);
    if (!reference) {
      if (kind == Kind::kLstm) {
        auto out = static_cast<DpLSTMImpl*>(rnn.get())->forward_with_lengths(features, lengths);
        return Head(std::get<0>(out), std::get<0>(std::get<1>(out)), false);
      }
      std::tuple<torch::Tensor, torch::Tensor> out =
          kind == Kind::kGru
              ? static_cast<DpGRUImpl*>(rnn.get())->forward_with_lengths(features, lengths)
              : static_cast<DpRNNImpl*>(rnn.get())->forward_with_lengths(features, lengths);
      return Head(std::get<0>(out), std::get<1>(out), false);
    }
    EXPECT_EQ(x.size(0), 1);
    torch::Tensor steps = features.narrow(1, 0, lengths.item<int64_t>());
    const DpRnnOptions& o = rnn->options();
    const int64_t cells = o.num_layers * rnn->directions();
    torch::Tensor h0 = torch::zeros({cells, 1, rnn->output_size()}, x.options());
    std::vector<torch::Tensor> params = rnn->DpParameters();
    if (kind == Kind::kLstm) {
      torch::Tensor c0 = torch::zeros({cells, 1, o.hidden_size}, x.options());
      auto out = torch::lstm(steps, {h0, c0}, params, o.bias, o.num_layers, 0, false,
                             o.bidirectional, true);
      return Head(std::get<0>(out), std::get<1>(out), true);
    }
    std::tuple<torch::Tensor, torch::Tensor> out;
    if (kind == Kind::kGru) {
      out = torch::gru(steps, h0, params, o.bias, o.num_layers, 0, false, o.bidirectional, true);
    } else if (kind == Kind::kRnnTanh) {
      out = torch::rnn_tanh(steps, h0, params, o.bias, o.num_layers, 0, false, o.bidirectional,
                            true);
    } else {
      out = torch::rnn_relu(steps, h0, params, o.bias, o.num_layers, 0, false, o.bidirectional,
                            true);
    }
    return Head(std::get<0>(out), std::get<1>(out), true);
  }
};

TestModel RecurrentModel(Kind kind, const DpRnnOptions& o) {
  auto net = std::make_shared<RecurrentNet>(kind, o);
  net->to(torch::kFloat64);
  return ModelFromBody(net, [raw = net.get()](const torch::Tensor& x, bool reference) {
    return raw->Forward(x, reference);
  });
}

// (B, T, in + 1) inputs whose last feature is the length (see RecurrentNet).
torch::Tensor PaddedInputs(const std::vector<int64_t>& lengths, int64_t steps, int64_t in) {
  const auto batch = static_cast<int64_t>(lengths.size());
  torch::Tensor x = torch::randn({batch, steps, in + 1}, torch::kFloat64);
  x.select(2, in).copy_(
      torch::tensor(lengths, torch::kFloat64).view({batch, 1}).expand({batch, steps}));
  return x;
}

TEST(DpRnnTest, LstmPerExampleGradientsMatchBatchSizeOneLoopWithPadding) {
  torch::manual_seed(4);
  TestModel model = RecurrentModel(Kind::kLstm, Options(4, 6, 2, true));
  CheckAgainstLoop(model, PaddedInputs({5, 2, 5, 1, 3}, 5, 4),
                   torch::tensor({0, 2, 1, 1, 0}, torch::kLong));
}

TEST(DpRnnTest, GruPerExampleGradientsMatchBatchSizeOneLoopWithPadding) {
  torch::manual_seed(5);
  TestModel model = RecurrentModel(Kind::kGru, Options(4, 6, 2, true));
  CheckAgainstLoop(model, PaddedInputs({3, 5, 1, 4, 5}, 5, 4),
                   torch::tensor({1, 0, 2, 1, 2}, torch::kLong));
}

TEST(DpRnnTest, BidirectionalProjectedLstmPerExampleGradientsMatchTheLoopWithPadding) {
  torch::manual_seed(13);
  TestModel model = RecurrentModel(Kind::kLstm, Options(4, 6, 2, true, true, 3));
  CheckAgainstLoop(model, PaddedInputs({5, 2, 5, 1, 3}, 5, 4),
                   torch::tensor({0, 2, 1, 1, 0}, torch::kLong));
}

TEST(DpRnnTest, BidirectionalBiasFreeGruPerExampleGradientsMatchTheLoopWithPadding) {
  torch::manual_seed(14);
  TestModel model = RecurrentModel(Kind::kGru, Options(4, 6, 2, true, true, 0, false));
  CheckAgainstLoop(model, PaddedInputs({3, 5, 1, 4, 5}, 5, 4),
                   torch::tensor({1, 0, 2, 1, 2}, torch::kLong));
}

TEST(DpRnnTest, RnnPerExampleGradientsMatchTheLoopWithPadding) {
  torch::manual_seed(15);
  TestModel tanh_model = RecurrentModel(Kind::kRnnTanh, Options(4, 6, 2, true, true));
  CheckAgainstLoop(tanh_model, PaddedInputs({4, 2, 4, 1}, 4, 4),
                   torch::tensor({1, 0, 2, 1}, torch::kLong));
  TestModel relu_model = RecurrentModel(Kind::kRnnRelu, Options(4, 6, 1, true));
  CheckAgainstLoop(relu_model, PaddedInputs({4, 3, 4, 2}, 4, 4),
                   torch::tensor({2, 0, 1, 1}, torch::kLong));
}

TEST(DpRnnTest, LongSequencesUseMaterialisedNormsAndMatchTheLoop) {
  // T (d + p) >= d p for both projections: kAuto materialises; the loop still agrees.
  torch::manual_seed(6);
  TestModel model = RecurrentModel(Kind::kLstm, Options(2, 3, 1, true));
  CheckAgainstLoop(model, PaddedInputs({12, 7, 12}, 12, 2),
                   torch::tensor({0, 1, 2}, torch::kLong));
}

TEST(DpRnnTest, ParametersGetNoOrdinaryGradientAndNoGradCapturesNothing) {
  DpLSTM lstm(3, 4);
  torch::Tensor x = torch::randn({5, 2, 3}, torch::requires_grad());
  std::get<0>(lstm->forward(x)).sum().backward();
  for (const torch::Tensor& p : lstm->parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_TRUE(x.grad().defined());  // the input gradient flows
  EXPECT_TRUE(lstm->HasCapture());
  EXPECT_EQ(lstm->CapturedBatchSize(), 2);
  std::vector<NamedPerExampleLayer> layers;
  nn::Sequential seq(lstm);
  EXPECT_TRUE(ValidateForPerExampleGradients(*seq, &layers).ok());
  torch::NoGradGuard no_grad;
  lstm->forward(x);
  EXPECT_FALSE(lstm->HasCapture());
}

}  // namespace
}  // namespace dpkit::optim
