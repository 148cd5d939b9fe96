#include "dpkit/optim/torch/dp_conv2d.h"

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

struct ConvNet : torch::nn::Module {
  DpConv2d conv1{nullptr}, conv2{nullptr};
  DpGroupNorm norm{nullptr};
  DpLinear fc{nullptr};
  ConvNet() {
    DpConv2dOptions o1;
    o1.in_channels = 2; o1.out_channels = 4; o1.kernel_size = {3, 3}; o1.stride = {2, 2};
    o1.padding = {1, 1};
    DpConv2dOptions o2;
    o2.in_channels = 4; o2.out_channels = 6; o2.kernel_size = {2, 3};
    conv1 = register_module("conv1", DpConv2d(o1));
    conv2 = register_module("conv2", DpConv2d(o2));
    norm = register_module("norm", DpGroupNorm(3, 6));
    fc = register_module("fc", DpLinear(6 * 3 * 2, 3));
  }
};

TEST(DpConv2dTest, Conv2dGroupNormAndPoolingMatchBatchSizeOneLoop) {
  torch::manual_seed(3);
  auto net = std::make_shared<ConvNet>();
  net->to(torch::kFloat64);
  // Non-trivial affine parameters so their gradients are generic.
  { torch::NoGradGuard guard; net->norm->weight.uniform_(0.5, 1.5); net->norm->bias.uniform_(-1, 1); }
  auto body = [&](const torch::Tensor& x, bool reference) {
    const auto& c1 = net->conv1->options();
    torch::Tensor h = reference ? torch::conv2d(x, net->conv1->weight, net->conv1->bias,
                                                {c1.stride[0], c1.stride[1]},
                                                {c1.padding[0], c1.padding[1]})
                                : net->conv1(x);
    h = F::max_pool2d(torch::relu(h), F::MaxPool2dFuncOptions(2).stride(1));
    h = reference ? torch::conv2d(h, net->conv2->weight, net->conv2->bias) : net->conv2(h);
    h = reference ? torch::group_norm(h, 3, net->norm->weight, net->norm->bias)
                  : net->norm(h);
    h = torch::tanh(h).flatten(1);
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  // 9x9 -> conv1 (3x3, stride 2, pad 1) 5x5 -> pool 4x4 -> conv2 (2x3) 3x2.
  CheckAgainstLoop(model, torch::randn({6, 2, 9, 9}, torch::kFloat64),
                   torch::randint(0, 3, {6}, torch::kLong));
}

struct WideConvNet : torch::nn::Module {
  DpConv2d conv{nullptr};
  DpLinear fc{nullptr};
  WideConvNet() {
    DpConv2dOptions o;
    o.in_channels = 8; o.out_channels = 3; o.kernel_size = {3, 3}; o.padding = {1, 1};
    conv = register_module("conv", DpConv2d(o));
    fc = register_module("fc", DpLinear(3, 2));
  }
};

TEST(DpConv2dTest, Conv2dNormsInSeveralUnfoldChunksMatchBatchSizeOneLoop) {
  // 8 channels, 3x3 kernel, 20x20 'same' output: one example's unfolded input is
  // 72 x 400 float64 = 230 KB, so the 512 KiB im2col budget holds 2 examples and the batch
  // of 5 is unfolded in 3 chunks (ghost and materialised norms both).
  torch::manual_seed(8);
  auto net = std::make_shared<WideConvNet>();
  net->to(torch::kFloat64);
  auto body = [&](const torch::Tensor& x, bool reference) {
    torch::Tensor h = reference ? torch::conv2d(x, net->conv->weight, net->conv->bias, 1, 1)
                                : net->conv(x);
    h = torch::tanh(h).mean({2, 3});
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  CheckAgainstLoop(model, torch::randn({5, 8, 20, 20}, torch::kFloat64),
                   torch::randint(0, 2, {5}, torch::kLong));
  // At 2 threads the chunks (still 2, 2 and 1 examples) are spread over the threads.
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  CheckAgainstLoop(model, torch::randn({5, 8, 20, 20}, torch::kFloat64),
                   torch::randint(0, 2, {5}, torch::kLong));
  torch::set_num_threads(threads);
}

struct DilatedConvNet : torch::nn::Module {
  DpConv2d conv{nullptr};
  DpLinear fc{nullptr};
  DilatedConvNet() {
    DpConv2dOptions o;
    o.in_channels = 3; o.out_channels = 4; o.kernel_size = {3, 2}; o.stride = {1, 2};
    o.padding = {2, 1}; o.dilation = {2, 3};
    conv = register_module("conv", DpConv2d(o));
    fc = register_module("fc", DpLinear(4, 2));
  }
};

TEST(DpConv2dTest, DilatedStridedPaddedConv2dMatchesBatchSizeOneLoop) {
  // Unequal strides, dilations and paddings per axis, so that a swapped axis or stride in
  // the im2col view shows: 9x11 input -> (9 + 4 - 2*2 - 1)/1 + 1 = 9 rows,
  // (11 + 2 - 3*1 - 1)/2 + 1 = 5 columns.
  torch::manual_seed(10);
  auto net = std::make_shared<DilatedConvNet>();
  net->to(torch::kFloat64);
  auto body = [&](const torch::Tensor& x, bool reference) {
    torch::Tensor h = reference ? torch::conv2d(x, net->conv->weight, net->conv->bias, {1, 2},
                                                {2, 1}, {2, 3})
                                : net->conv(x);
    EXPECT_EQ(h.size(2), 9);
    EXPECT_EQ(h.size(3), 5);
    h = torch::tanh(h).mean({2, 3});
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  CheckAgainstLoop(model, torch::randn({4, 3, 9, 11}, torch::kFloat64),
                   torch::randint(0, 2, {4}, torch::kLong));
}

struct SingleConvNet : torch::nn::Module {
  DpConv2d conv{nullptr};
  DpLinear fc{nullptr};
  SingleConvNet(const DpConv2dOptions& o, int64_t positions) {
    conv = register_module("conv", DpConv2d(o));
    fc = register_module("fc", DpLinear(o.out_channels * positions, 2));
  }
};

TEST(DpConv2dTest, Conv2dKernelWidthsStridesPaddingsAndDilationsMatchBatchSizeOneLoop) {
  // im2row copies a kernel row with a compile-time length for widths 2, 3, 4, 5, 7 and 8 at
  // dilation 1, and element by element otherwise (widths 1, 6, 9; dilation 2); padding
  // goes through a zero-padded copy of each example. Every combination must give the
  // loop's gradients, norms and clipped sums.
  torch::manual_seed(11);
  for (int64_t width = 1; width <= 9; ++width) {
    for (int64_t stride : {1, 2}) {
      for (int64_t padding : {0, 2}) {
        for (int64_t dilation : {1, 2}) {
          DpConv2dOptions o;
          o.in_channels = 2; o.out_channels = 3; o.kernel_size = {2, width};
          o.stride = {stride, stride}; o.padding = {padding, padding};
          o.dilation = {dilation, dilation};
          const int64_t height = 5, input_width = 18;
          const int64_t out_h = (height + 2 * padding - dilation - 1) / stride + 1;
          const int64_t out_w = (input_width + 2 * padding - dilation * (width - 1) - 1) / stride + 1;
          auto net = std::make_shared<SingleConvNet>(o, out_h * out_w);
          net->to(torch::kFloat64);
          auto body = [&](const torch::Tensor& x, bool reference) {
            torch::Tensor h = reference ? torch::conv2d(x, net->conv->weight, net->conv->bias,
                                                        stride, padding, dilation)
                                        : net->conv(x);
            h = torch::tanh(h).flatten(1);
            return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
          };
          TestModel model = ModelFromBody(net, body);
          SCOPED_TRACE(testing::Message() << "kernel 2x" << width << " stride " << stride
                                          << " padding " << padding << " dilation " << dilation);
          CheckAgainstLoop(model, torch::randn({3, 2, height, input_width}, torch::kFloat64),
                           torch::randint(0, 2, {3}, torch::kLong));
        }
      }
    }
  }
}

struct MnistShapedConvNet : torch::nn::Module {
  DpConv2d conv1{nullptr}, conv2{nullptr};
  DpLinear fc{nullptr};
  MnistShapedConvNet() {
    // The MNIST CNN's convolutions (models/mnist_models.h): 16@8x8 stride 2 padding 3 on
    // 28x28, max-pool 2 stride 1, 32@4x4 stride 2.
    DpConv2dOptions o1;
    o1.in_channels = 1; o1.out_channels = 16; o1.kernel_size = {8, 8}; o1.stride = {2, 2};
    o1.padding = {3, 3};
    DpConv2dOptions o2;
    o2.in_channels = 16; o2.out_channels = 32; o2.kernel_size = {4, 4}; o2.stride = {2, 2};
    conv1 = register_module("conv1", DpConv2d(o1));
    conv2 = register_module("conv2", DpConv2d(o2));
    fc = register_module("fc", DpLinear(32 * 5 * 5, 3));
  }
};

TEST(DpConv2dTest, MnistCnnConvolutionsMatchBatchSizeOneLoop) {
  torch::manual_seed(12);
  auto net = std::make_shared<MnistShapedConvNet>();
  net->to(torch::kFloat64);
  auto body = [&](const torch::Tensor& x, bool reference) {
    torch::Tensor h = reference ? torch::conv2d(x, net->conv1->weight, net->conv1->bias, 2, 3)
                                : net->conv1(x);
    h = F::max_pool2d(torch::relu(h), F::MaxPool2dFuncOptions(2).stride(1));  // 14 -> 13
    h = reference ? torch::conv2d(h, net->conv2->weight, net->conv2->bias, 2) : net->conv2(h);
    h = torch::relu(h).flatten(1);  // 32 x 5 x 5
    return reference ? F::linear(h, net->fc->weight, net->fc->bias) : net->fc(h);
  };
  TestModel model = ModelFromBody(net, body);
  CheckAgainstLoop(model, torch::rand({3, 1, 28, 28}, torch::kFloat64),
                   torch::randint(0, 3, {3}, torch::kLong));
}

TEST(DpConv2dTest, Float32ConvolutionNormsAndSumsAgreeWithFloat64) {
  // The float32 instantiations of im2row and of the squared norms: the same layer and
  // inputs in float32 and float64, materialised (kAuto: the buffer is small) and ghost.
  torch::manual_seed(13);
  DpConv2dOptions o;
  o.in_channels = 16; o.out_channels = 32; o.kernel_size = {4, 4}; o.stride = {2, 2};
  DpConv2d conv32(o), conv64(o);
  {
    torch::NoGradGuard no_grad;
    conv64->to(torch::kFloat64);
    conv64->weight.copy_(conv32->weight);
    conv64->bias.copy_(conv32->bias);
  }
  torch::Tensor x = torch::randn({6, 16, 13, 13});
  torch::Tensor target = torch::randn({6, 32, 5, 5});
  (conv32(x) * target).sum().backward();
  (conv64(x.to(torch::kFloat64)) * target.to(torch::kFloat64)).sum().backward();
  torch::Tensor scales = torch::rand({6}, torch::kFloat64);
  // float32 products go through oneDNN's sgemm where LibTorch has it (float64 through
  // at::bmm_out); at 2 threads each thread multiplies its own half of the batch.
  const int threads = torch::get_num_threads();
  for (int t : {1, 2}) {
    torch::set_num_threads(t);
    for (NormMethod method : {NormMethod::kAuto, NormMethod::kGhost}) {
      conv32->SetNormMethod(method);
      conv64->SetNormMethod(method);
      std::vector<torch::Tensor> norms32, norms64;
      conv32->AppendSquaredNorms(&norms32);
      conv64->AppendSquaredNorms(&norms64);
      std::vector<torch::Tensor> sums32 = conv32->ScaledGradientSums({scales, scales});
      std::vector<torch::Tensor> sums64 = conv64->ScaledGradientSums({scales, scales});
      for (size_t k = 0; k < 2; ++k) {
        // float32 products of 25-400 terms: relative rounding ~400 * 6e-8; 1e-4 leaves
        // margin.
        EXPECT_LT(RelativeError(norms32[k], norms64[k]), 1e-4)
            << t << " threads, method " << static_cast<int>(method);
        EXPECT_LT(RelativeError(sums32[k], sums64[k]), 1e-4)
            << t << " threads, method " << static_cast<int>(method);
      }
    }
  }
  torch::set_num_threads(threads);
}

}  // namespace
}  // namespace dpkit::optim
