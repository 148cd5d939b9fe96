// Models for the MNIST-family trainers.
//
// MnistCnn: the CNN of TensorFlow Privacy's MNIST tutorial used by Bu et al. 2020, Sec. 4.1:
//   conv 16 filters 8x8 stride 2 'same' -> max-pool 2x2 stride 1 ->
//   conv 32 filters 4x4 stride 2 'valid' -> max-pool 2x2 stride 1 -> dense 32 -> dense 10,
// with ReLU, or tanh as the tempered-sigmoid option (Papernot et al. 2021). On 28x28 input:
// 28 -> 14 (pad 3 each side, TF 'same') -> 13 -> 5 -> 4, so dense 32 reads 32*4*4 = 512.
// Built from the per-example layers (optim/torch) for DP training; `PlainMnistCnn` is the
// same architecture from ordinary torch::nn layers, for non-private baselines/benchmarks.
//
// PcaMlp: Abadi et al. 2016, Sec. 5.1: inputs projected on 60 principal directions (DP-PCA,
// see models/dp_pca.h), then one hidden layer of 1,000 ReLU units and 10 outputs.
#ifndef DPKIT_MODELS_MNIST_MODELS_H_
#define DPKIT_MODELS_MNIST_MODELS_H_

#include <cstdint>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layers.h"

namespace dpkit::models {

enum class Activation { kRelu, kTanh };

class MnistCnnImpl : public torch::nn::Module {
 public:
  explicit MnistCnnImpl(Activation activation = Activation::kRelu);
  // x: (B, 1, 28, 28) -> logits (B, 10).
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor Act(const torch::Tensor& x) const;
  Activation activation_;
  optim::DpConv2d conv1_{nullptr}, conv2_{nullptr};
  optim::DpLinear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(MnistCnn);

class PlainMnistCnnImpl : public torch::nn::Module {
 public:
  explicit PlainMnistCnnImpl(Activation activation = Activation::kRelu);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  Activation activation_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(PlainMnistCnn);

class PcaMlpImpl : public torch::nn::Module {
 public:
  PcaMlpImpl(int64_t input_dim = 60, int64_t hidden = 1000);
  torch::Tensor forward(const torch::Tensor& x);  // (B, input_dim) -> (B, 10)

 private:
  optim::DpLinear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(PcaMlp);

// The learning rate of PcaMlp's training (Abadi et al. 2016, Sec. 5.1: "set at 0.1
// initially and linearly decreased to 0.052 over 10 epochs and then fixed to 0.052
// thereafter") at 0-based step `step` with `steps_per_epoch` steps per epoch, for an initial
// rate `initial` (0.1 in the paper; another initial rate keeps the same shape, ending at
// 0.52 * initial): initial * (1 - 0.48 * min(1, step / (10 * steps_per_epoch))).
double AbadiPcaLearningRate(int64_t step, int64_t steps_per_epoch, double initial);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_MNIST_MODELS_H_
