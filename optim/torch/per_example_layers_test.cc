#include "optim/torch/per_example_layers.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;

// Largest absolute difference relative to the largest absolute reference value. The
// models run in float64, so 1e-5 measures the per-example rule, not float32 rounding
// (float64 accumulates ~1e-15 relative error in these small products).
double RelativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  double scale = expected.abs().max().item<double>();
  double diff = (actual.to(torch::kFloat64) - expected.to(torch::kFloat64)).abs().max()
                    .item<double>();
  return scale > 0 ? diff / scale : diff;
}
constexpr double kTolerance = 1e-5;

// A test model: the same parameters run through the DP layers (one batched backward) and
// through plain LibTorch ops (the reference, one example at a time).
struct TestModel {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;    // DP layers, logits
  std::function<torch::Tensor(const torch::Tensor&)> reference;  // plain ops, logits
};

// The TestModel whose DP and reference passes are body(x, false) and body(x, true).
template <typename Body>
TestModel ModelFromBody(std::shared_ptr<torch::nn::Module> module, Body body) {
  return {std::move(module), [body](const torch::Tensor& x) { return body(x, false); },
          [body](const torch::Tensor& x) { return body(x, true); }};
}

torch::Tensor PerExampleLoss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kNone));
}

// Checks, for every layer and parameter: per-example gradients, their squared norms by
// every method, and the clip-factor-weighted sum, against a batch-size-1 autograd loop.
void CheckAgainstLoop(TestModel& model, const torch::Tensor& inputs, const torch::Tensor& labels) {
  std::vector<NamedPerExampleLayer> layers;
  ASSERT_TRUE(ValidateForPerExampleGradients(*model.module, &layers).ok());
  int64_t batch = inputs.size(0);
  PerExampleLoss(model.forward(inputs), labels).sum().backward();

  std::vector<torch::Tensor> params;
  for (auto& l : layers) {
    for (auto& p : l.layer->DpParameters()) params.push_back(p);
  }
  // Reference: ordinary autograd, one example at a time.
  std::vector<std::vector<torch::Tensor>> expected(params.size());
  for (int64_t i = 0; i < batch; ++i) {
    torch::Tensor loss =
        PerExampleLoss(model.reference(inputs.narrow(0, i, 1)), labels.narrow(0, i, 1)).sum();
    std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, params);
    for (size_t p = 0; p < params.size(); ++p) expected[p].push_back(grads[p]);
  }
  torch::manual_seed(7);
  size_t p = 0;
  for (auto& l : layers) {
    std::vector<torch::Tensor> per = l.layer->PerExampleGradients();
    std::vector<torch::Tensor> scales;
    for (size_t k = 0; k < per.size(); ++k) scales.push_back(torch::rand({batch}, torch::kFloat64));
    std::vector<std::vector<torch::Tensor>> norms_by_method;
    for (NormMethod method : {NormMethod::kGhost, NormMethod::kMaterialize, NormMethod::kAuto}) {
      l.layer->SetNormMethod(method);
      std::vector<torch::Tensor> norms;
      l.layer->AppendSquaredNorms(&norms);
      ASSERT_EQ(norms.size(), per.size());
      std::vector<torch::Tensor> sums = l.layer->ScaledGradientSums(scales);
      for (size_t k = 0; k < per.size(); ++k) {
        torch::Tensor want = torch::stack(expected[p + k]).squeeze(1);
        want = want.view(per[k].sizes());
        torch::Tensor want_norms = want.reshape({batch, -1}).pow(2).sum(1);
        torch::Tensor want_sum =
            (want * scales[k].view({batch}).reshape(
                        [&] { std::vector<int64_t> s(want.dim(), 1); s[0] = batch; return s; }()))
                .sum(0);
        EXPECT_LT(RelativeError(per[k], want), kTolerance) << l.name << " param " << k;
        EXPECT_LT(RelativeError(norms[k], want_norms), kTolerance)
            << l.name << " param " << k << " method " << static_cast<int>(method);
        EXPECT_LT(RelativeError(sums[k], want_sum), kTolerance)
            << l.name << " param " << k << " method " << static_cast<int>(method);
      }
    }
    // Microbatches of uneven sizes whose members are not consecutive: the squared norm of
    // the sum of the loop's gradients over each microbatch's examples.
    std::vector<std::vector<int64_t>> members(3);
    for (int64_t i = 0; i < batch; ++i) members[(i * 2) % 3].push_back(i);
    int64_t n_max = 0;
    for (auto& m : members) n_max = std::max<int64_t>(n_max, m.size());
    torch::Tensor microbatches = torch::full({3, n_max}, batch, torch::kLong);
    for (int64_t j = 0; j < 3; ++j) {
      for (size_t t = 0; t < members[j].size(); ++t) microbatches[j][t] = members[j][t];
    }
    for (NormMethod method : {NormMethod::kGhost, NormMethod::kMaterialize, NormMethod::kAuto}) {
      l.layer->SetNormMethod(method);
      std::vector<torch::Tensor> norms;
      l.layer->AppendMicrobatchSquaredNorms(microbatches, &norms);
      ASSERT_EQ(norms.size(), per.size());
      for (size_t k = 0; k < per.size(); ++k) {
        std::vector<double> want_norms;
        for (const auto& m : members) {
          torch::Tensor sum = torch::zeros_like(expected[p + k][0]);
          for (int64_t i : m) sum += expected[p + k][i];
          want_norms.push_back(sum.pow(2).sum().item<double>());
        }
        EXPECT_LT(RelativeError(norms[k], torch::tensor(want_norms, torch::kFloat64)), kTolerance)
            << l.name << " param " << k << " microbatch norms, method "
            << static_cast<int>(method);
      }
    }
    p += per.size();
  }
}

struct LinearNet : torch::nn::Module {
  DpLinear fc1{nullptr}, fc2{nullptr};
  LinearNet() {
    fc1 = register_module("fc1", DpLinear(6, 5));
    fc2 = register_module("fc2", DpLinear(5, 3));
  }
};

TEST(PerExampleLayersTest, LinearMatchesBatchSizeOneLoop) {
  torch::manual_seed(1);
  auto net = std::make_shared<LinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net, [&](const torch::Tensor& x) { return net->fc2(torch::tanh(net->fc1(x))); },
                  [&](const torch::Tensor& x) {
                    return F::linear(torch::tanh(F::linear(x, net->fc1->weight, net->fc1->bias)),
                                     net->fc2->weight, net->fc2->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({7, 6}, torch::kFloat64),
                   torch::randint(0, 3, {7}, torch::kLong));
}

TEST(PerExampleLayersTest, LinearOverSequencePositionsMatchesBatchSizeOneLoop) {
  torch::manual_seed(2);
  auto net = std::make_shared<LinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net,
                  [&](const torch::Tensor& x) { return net->fc2(torch::relu(net->fc1(x)).mean(1)); },
                  [&](const torch::Tensor& x) {
                    return F::linear(
                        torch::relu(F::linear(x, net->fc1->weight, net->fc1->bias)).mean(1),
                        net->fc2->weight, net->fc2->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({5, 4, 6}, torch::kFloat64),
                   torch::randint(0, 3, {5}, torch::kLong));
}

struct WideLinearNet : torch::nn::Module {
  DpLinear fc1{nullptr}, fc2{nullptr};
  WideLinearNet() {
    fc1 = register_module("fc1", DpLinear(64, 48));
    fc2 = register_module("fc2", DpLinear(48, 3));
  }
};

TEST(PerExampleLayersTest, ProductsSplitAcrossTwoThreadsMatchBatchSizeOneLoop) {
  // At 2 LibTorch threads with per-example products above the size from which they are
  // split across threads (ghost Gram products of fc1 over 32 positions: 32 x 64 x 32
  // multiply-adds per example; materialised: 48 x 32 x 64), each thread computes the
  // norms of its own range of examples; the results must not depend on the split.
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  torch::manual_seed(9);
  auto net = std::make_shared<WideLinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net,
                  [&](const torch::Tensor& x) { return net->fc2(torch::tanh(net->fc1(x)).mean(1)); },
                  [&](const torch::Tensor& x) {
                    return F::linear(
                        torch::tanh(F::linear(x, net->fc1->weight, net->fc1->bias)).mean(1),
                        net->fc2->weight, net->fc2->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({7, 32, 64}, torch::kFloat64),
                   torch::randint(0, 3, {7}, torch::kLong));
  torch::set_num_threads(threads);
}

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

TEST(PerExampleLayersTest, Conv2dGroupNormAndPoolingMatchBatchSizeOneLoop) {
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

TEST(PerExampleLayersTest, Conv2dNormsInSeveralUnfoldChunksMatchBatchSizeOneLoop) {
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

TEST(PerExampleLayersTest, DilatedStridedPaddedConv2dMatchesBatchSizeOneLoop) {
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

TEST(PerExampleLayersTest, Conv2dKernelWidthsStridesPaddingsAndDilationsMatchBatchSizeOneLoop) {
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

TEST(PerExampleLayersTest, MnistCnnConvolutionsMatchBatchSizeOneLoop) {
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

TEST(PerExampleLayersTest, Float32ConvolutionNormsAndSumsAgreeWithFloat64) {
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

struct LargeLinearNet : torch::nn::Module {
  DpLinear fc{nullptr};
  LargeLinearNet() { fc = register_module("fc", DpLinear(1024, 640)); }
};

TEST(PerExampleLayersTest, LargeWeightedSumSplitAcrossTwoThreadsMatchesBatchSizeOneLoop) {
  // Materialised per-example gradients of 2 x 640 x 1024 = 1.3 M elements: at 2 threads
  // the clip-factor-weighted sum splits the columns across the threads (from 1 M elements).
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  torch::manual_seed(14);
  auto net = std::make_shared<LargeLinearNet>();
  net->to(torch::kFloat64);
  TestModel model{net, [&](const torch::Tensor& x) { return net->fc(x); },
                  [&](const torch::Tensor& x) {
                    return F::linear(x, net->fc->weight, net->fc->bias);
                  }};
  CheckAgainstLoop(model, torch::randn({2, 1024}, torch::kFloat64),
                   torch::randint(0, 640, {2}, torch::kLong));
  torch::set_num_threads(threads);
}

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

TEST(PerExampleLayersTest, EmbeddingAndLayerNormMatchBatchSizeOneLoop) {
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

TEST(PerExampleLayersTest, SingleIndexEmbeddingMatchesBatchSizeOneLoop) {
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

TEST(PerExampleLayersTest, Float32NormsAgreeWithFloat64Norms) {
  torch::manual_seed(6);
  DpLinear layer(30, 20);
  torch::Tensor x = torch::randn({8, 30});
  layer(x).pow(2).sum().backward();
  std::vector<torch::Tensor> ghost, materialized;
  layer->SetNormMethod(NormMethod::kGhost);
  layer->AppendSquaredNorms(&ghost);
  layer->SetNormMethod(NormMethod::kMaterialize);
  layer->AppendSquaredNorms(&materialized);
  // float32 products of 30 terms: relative rounding ~30 * 6e-8; 1e-5 leaves margin.
  EXPECT_LT(RelativeError(ghost[0], materialized[0]), 1e-5);
}

TEST(PerExampleLayersTest, ParametersGetNoOrdinaryGradient) {
  DpLinear layer(3, 2);
  layer(torch::randn({4, 3})).sum().backward();
  EXPECT_FALSE(layer->weight.grad().defined());
  EXPECT_TRUE(layer->HasCapture());
  EXPECT_EQ(layer->CapturedBatchSize(), 4);
}

TEST(PerExampleLayersTest, NoGradForwardCapturesNothing) {
  DpLinear layer(3, 2);
  torch::NoGradGuard guard;
  torch::Tensor y = layer(torch::randn({4, 3}));
  EXPECT_EQ(y.size(1), 2);
  EXPECT_FALSE(layer->HasCapture());
}

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
