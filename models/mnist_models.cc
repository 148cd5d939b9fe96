#include "dpkit/models/mnist_models.h"

#include <algorithm>

namespace dpkit::models {
namespace {

namespace F = torch::nn::functional;

optim::DpConv2dOptions ConvOptions(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                   int64_t padding) {
  optim::DpConv2dOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.kernel_size = {kernel, kernel};
  o.stride = {stride, stride};
  o.padding = {padding, padding};
  return o;
}

torch::Tensor Apply(Activation a, const torch::Tensor& x) {
  return a == Activation::kRelu ? torch::relu(x) : torch::tanh(x);
}

torch::Tensor Pool(const torch::Tensor& x) {
  return F::max_pool2d(x, F::MaxPool2dFuncOptions(2).stride(1));
}

}  // namespace

MnistCnnImpl::MnistCnnImpl(Activation activation) : activation_(activation) {
  // TF 'same' with stride 2 on 28: output 14, total padding (14-1)*2 + 8 - 28 = 6 -> 3 + 3.
  conv1_ = register_module("conv1", optim::DpConv2d(ConvOptions(1, 16, 8, 2, 3)));
  conv2_ = register_module("conv2", optim::DpConv2d(ConvOptions(16, 32, 4, 2, 0)));
  fc1_ = register_module("fc1", optim::DpLinear(32 * 4 * 4, 32));
  fc2_ = register_module("fc2", optim::DpLinear(32, 10));
}

torch::Tensor MnistCnnImpl::Act(const torch::Tensor& x) const { return Apply(activation_, x); }

torch::Tensor MnistCnnImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = Pool(Act(conv1_(x)));
  h = Pool(Act(conv2_(h)));
  h = Act(fc1_(h.flatten(1)));
  return fc2_(h);
}

PlainMnistCnnImpl::PlainMnistCnnImpl(Activation activation) : activation_(activation) {
  conv1_ = register_module(
      "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 8).stride(2).padding(3)));
  conv2_ = register_module("conv2",
                           torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 4).stride(2)));
  fc1_ = register_module("fc1", torch::nn::Linear(32 * 4 * 4, 32));
  fc2_ = register_module("fc2", torch::nn::Linear(32, 10));
}

torch::Tensor PlainMnistCnnImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = Pool(Apply(activation_, conv1_(x)));
  h = Pool(Apply(activation_, conv2_(h)));
  h = Apply(activation_, fc1_(h.flatten(1)));
  return fc2_(h);
}

PcaMlpImpl::PcaMlpImpl(int64_t input_dim, int64_t hidden) {
  fc1_ = register_module("fc1", optim::DpLinear(input_dim, hidden));
  fc2_ = register_module("fc2", optim::DpLinear(hidden, 10));
}

torch::Tensor PcaMlpImpl::forward(const torch::Tensor& x) {
  return fc2_(torch::relu(fc1_(x)));
}

double AbadiPcaLearningRate(int64_t step, int64_t steps_per_epoch, double initial) {
  constexpr double kDecayEpochs = 10, kFinalFraction = 0.052 / 0.1;
  const double progress = std::min(
      1.0, static_cast<double>(step) /
               (kDecayEpochs * static_cast<double>(std::max<int64_t>(1, steps_per_epoch))));
  return initial * (1 - (1 - kFinalFraction) * progress);
}

}  // namespace dpkit::models
