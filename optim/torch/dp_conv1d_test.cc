#include "dpkit/optim/torch/dp_conv1d.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "dpkit/optim/torch/per_example_testing.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;
namespace nn = torch::nn;

// The configurations checked: every padding form and mode torch::nn::Conv1d has, groups,
// strides, dilations, with and without bias.
std::vector<nn::Conv1dOptions> Configurations() {
  return {
      nn::Conv1dOptions(4, 6, 3),
      nn::Conv1dOptions(4, 6, 3).stride(2).padding(2).dilation(2).groups(2),
      nn::Conv1dOptions(6, 4, 5).padding(1).groups(2).bias(false),
      nn::Conv1dOptions(4, 8, 4).padding(torch::kSame),  // total 3: 1 before, 2 after
      nn::Conv1dOptions(4, 4, 3).padding(torch::kSame).dilation(3).groups(4),
      nn::Conv1dOptions(4, 6, 2).padding(torch::kValid).stride(3),
      nn::Conv1dOptions(4, 6, 3).padding(2).padding_mode(torch::kReflect),
      nn::Conv1dOptions(4, 6, 4).padding(torch::kSame).padding_mode(torch::kReplicate),
      nn::Conv1dOptions(4, 2, 3).padding(1).stride(2).padding_mode(torch::kCircular).groups(2),
  };
}

TEST(DpConv1dTest, ForwardEqualsTorchConv1dBitForBitAndInitialisesAsTorch) {
  for (const nn::Conv1dOptions& options : Configurations()) {
    torch::manual_seed(1);
    nn::Conv1d conv(options);
    torch::manual_seed(1);
    DpConv1d dp(options);
    SCOPED_TRACE(dp->Describe());
    // The same initialisation from the same seed, under the same names.
    ASSERT_EQ(dp->named_parameters().keys(), conv->named_parameters().keys());
    for (const auto& p : conv->named_parameters()) {
      EXPECT_TRUE(torch::equal(dp->named_parameters()[p.key()], p.value())) << p.key();
    }
    torch::Tensor x = torch::randn({3, options.in_channels(), 11});
    torch::Tensor want = conv->forward(x);
    EXPECT_TRUE(torch::equal(dp->forward(x), want));  // autograd on: the capturing function
    {
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(torch::equal(dp->forward(x), want));
    }
    // The input gradient is torch's too.
    torch::Tensor x1 = x.clone().requires_grad_(), x2 = x.clone().requires_grad_();
    torch::Tensor probe = torch::randn_like(want);
    (conv->forward(x1) * probe).sum().backward();
    (dp->forward(x2) * probe).sum().backward();
    EXPECT_LT(RelativeError(x2.grad(), x1.grad()), 1e-6);
    EXPECT_FALSE(dp->weight.grad().defined());  // the rule, not autograd, makes it
  }
}

// Conv1d (`options`) then tanh, a mean over positions and a DpLinear head.
struct ConvHead : nn::Module {
  DpConv1d conv{nullptr};
  DpLinear fc{nullptr};
  explicit ConvHead(const nn::Conv1dOptions& options) {
    conv = register_module("conv", DpConv1d(options));
    fc = register_module("fc", DpLinear(options.out_channels(), 3));
  }
};

// The reference: torch::nn::functional's conv1d (after F::pad for the padding modes) on
// the DP layer's own weight and bias.
torch::Tensor ReferenceConv(const DpConv1dImpl& dp, const torch::Tensor& x) {
  const nn::Conv1dOptions& o = dp.options();
  auto conv = F::Conv1dFuncOptions().stride(o.stride()).dilation(o.dilation()).groups(o.groups());
  if (!c10::holds_alternative<torch::enumtype::kZeros>(o.padding_mode())) {
    std::vector<int64_t> pad = {0, 0};
    if (const auto* numbers = c10::get_if<torch::ExpandingArray<1>>(&o.padding())) {
      pad = {(**numbers)[0], (**numbers)[0]};
    } else if (c10::holds_alternative<torch::enumtype::kSame>(o.padding())) {
      const int64_t total = (*o.dilation())[0] * ((*o.kernel_size())[0] - 1);
      pad = {total / 2, total - total / 2};
    }
    F::PadFuncOptions::mode_t mode = torch::kCircular;
    if (c10::holds_alternative<torch::enumtype::kReflect>(o.padding_mode())) mode = torch::kReflect;
    if (c10::holds_alternative<torch::enumtype::kReplicate>(o.padding_mode())) {
      mode = torch::kReplicate;
    }
    return F::conv1d(F::pad(x, F::PadFuncOptions(pad).mode(mode)), dp.weight,
                     conv.bias(dp.bias).padding(0));
  }
  return F::conv1d(x, dp.weight, conv.bias(dp.bias).padding(o.padding()));
}

TEST(DpConv1dTest, PerExampleGradientsMatchBatchSizeOneLoopForEveryConfiguration) {
  for (const nn::Conv1dOptions& options : Configurations()) {
    torch::manual_seed(2);
    auto net = std::make_shared<ConvHead>(options);
    net->to(torch::kFloat64);
    SCOPED_TRACE(net->conv->Describe());
    TestModel model =
        ModelFromBody(net, [raw = net.get()](const torch::Tensor& x, bool reference) {
          torch::Tensor h = reference ? ReferenceConv(*raw->conv, x) : raw->conv(x);
          h = torch::tanh(h).mean(2);
          return reference ? F::linear(h, raw->fc->weight, raw->fc->bias) : raw->fc(h);
        });
    CheckAgainstLoop(model, torch::randn({5, options.in_channels(), 13}, torch::kFloat64),
                     torch::tensor({0, 2, 1, 1, 0}, torch::kLong));
  }
}

// Padded sequences: inputs (B, C + 1, T) whose last channel holds the example's length;
// zeros after it. A "same" convolution with zero padding sees zeros beyond the length
// whether the zeros are padding or the batch's fill, so each example's logits (a mean over
// its own positions) equal a run on its unpadded sequence, which the reference does.
TEST(DpConv1dTest, PaddedSequencesMatchTheLoopOverUnpaddedSequences) {
  torch::manual_seed(3);
  auto net = std::make_shared<ConvHead>(nn::Conv1dOptions(3, 5, 3).padding(1).groups(1));
  net->to(torch::kFloat64);
  TestModel model =
      ModelFromBody(net, [raw = net.get()](const torch::Tensor& x, bool reference) {
        const int64_t channels = x.size(1) - 1, steps = x.size(2);
        torch::Tensor features = x.narrow(1, 0, channels);
        torch::Tensor lengths = x.select(1, channels).select(1, 0);
        if (reference) {
          features = features.narrow(2, 0, lengths.item<int64_t>());
          torch::Tensor h = torch::tanh(ReferenceConv(*raw->conv, features)).mean(2);
          return F::linear(h, raw->fc->weight, raw->fc->bias);
        }
        torch::Tensor valid =
            (torch::arange(steps, x.options()).view({1, 1, steps}) < lengths.view({-1, 1, 1}))
                .to(x.scalar_type());
        torch::Tensor h = (torch::tanh(raw->conv(features)) * valid).sum(2) /
                          lengths.view({-1, 1});
        return raw->fc(h);
      });
  const std::vector<int64_t> lengths = {9, 4, 7, 2, 9};
  torch::Tensor x = torch::zeros({5, 4, 9}, torch::kFloat64);
  for (int64_t i = 0; i < 5; ++i) {
    x[i].narrow(0, 0, 3).narrow(1, 0, lengths[i]).normal_();
    x[i][3].fill_(static_cast<double>(lengths[i]));
  }
  CheckAgainstLoop(model, x, torch::tensor({1, 0, 2, 2, 1}, torch::kLong));
}

TEST(DpConv1dTest, NormsInSeveralUnfoldChunksAndThreadsMatchTheLoop) {
  // 64 channels, kernel 5, 64 positions: one example's rows are 64 x 320 float64 = 160 KB,
  // so the 512 KiB im2row budget holds 3 examples and the batch of 7 runs in 3 chunks.
  torch::manual_seed(4);
  auto net = std::make_shared<ConvHead>(nn::Conv1dOptions(64, 4, 5).padding(2).groups(2));
  net->to(torch::kFloat64);
  TestModel model =
      ModelFromBody(net, [raw = net.get()](const torch::Tensor& x, bool reference) {
        torch::Tensor h = reference ? ReferenceConv(*raw->conv, x) : raw->conv(x);
        h = torch::tanh(h).mean(2);
        return reference ? F::linear(h, raw->fc->weight, raw->fc->bias) : raw->fc(h);
      });
  torch::Tensor labels = torch::tensor({0, 2, 1, 1, 0, 2, 1}, torch::kLong);
  CheckAgainstLoop(model, torch::randn({7, 64, 64}, torch::kFloat64), labels);
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  CheckAgainstLoop(model, torch::randn({7, 64, 64}, torch::kFloat64), labels);
  torch::set_num_threads(threads);
}

TEST(DpConv1dTest, Float32NormsAgreeWithFloat64) {
  // The float32 path (oneDNN's sgemm on strided group blocks) against float64.
  torch::manual_seed(5);
  DpConv1d conv(nn::Conv1dOptions(6, 4, 3).padding(1).groups(2));
  DpConv1d conv64(nn::Conv1dOptions(6, 4, 3).padding(1).groups(2));
  {
    torch::NoGradGuard no_grad;
    conv64->to(torch::kFloat64);
    conv64->weight.copy_(conv->weight);
    conv64->bias.copy_(conv->bias);
  }
  torch::Tensor x = torch::randn({9, 6, 20});
  torch::Tensor probe = torch::randn({9, 4, 20}, torch::kFloat64);
  (conv(x) * probe.to(torch::kFloat32)).sum().backward();
  (conv64(x.to(torch::kFloat64)) * probe).sum().backward();
  for (NormMethod method : {NormMethod::kGhost, NormMethod::kMaterialize}) {
    conv->SetNormMethod(method);
    conv64->SetNormMethod(method);
    std::vector<torch::Tensor> n32, n64;
    conv->AppendSquaredNorms(&n32);
    conv64->AppendSquaredNorms(&n64);
    // float32 products of 18-term dot products: ~1e-6 relative.
    EXPECT_LT(RelativeError(n32[0], n64[0]), 1e-5);
    EXPECT_LT(RelativeError(n32[1], n64[1]), 1e-5);
  }
}

TEST(DpConv1dTest, RejectsUnbatchedInputAndStridedSame) {
  DpConv1d conv(nn::Conv1dOptions(2, 3, 3));
  EXPECT_THROW(conv(torch::randn({2, 10})), c10::Error);
  EXPECT_THROW(DpConv1d(nn::Conv1dOptions(2, 3, 3).padding(torch::kSame).stride(2)),
               c10::Error);
  EXPECT_THROW(DpConv1d(nn::Conv1dOptions(3, 3, 3).groups(2)), c10::Error);
}

}  // namespace
}  // namespace dpkit::optim
