// Differentially private training of your own LibTorch model: define it with torch::nn
// layers, call dpkit::MakePrivateWithEpsilon, train as usual (optim/torch/make_private.h).
#include <iostream>
#include <memory>

#include <torch/torch.h>

#include "dpkit/optim/torch/make_private.h"

namespace nn = torch::nn;
const auto kSum = nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum);

// Your model: any module class whose layers are called through its module tree.
struct Classifier : nn::Module {
  nn::Sequential body{nullptr};
  Classifier() {
    body = register_module(
        "body", nn::Sequential(nn::Linear(2, 32), nn::ReLU(),
                               nn::LayerNorm(nn::LayerNormOptions({32})), nn::Linear(32, 2)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return body->forward(x); }
};

int main() {
  torch::manual_seed(0);
  torch::Tensor x = torch::randn({4000, 2});  // toy data: which side of a line
  torch::Tensor y = (x.select(1, 0) + x.select(1, 1) > 0).to(torch::kLong);
  Classifier model;
  auto sgd = std::make_unique<torch::optim::SGD>(model.parameters(), /*lr=*/0.5);
  dpkit::optim::MakePrivateOptions options;
  options.max_grad_norm = 1.0, options.dataset_size = 4000, options.expected_batch_size = 200;
  auto training = dpkit::MakePrivateWithEpsilon(model, std::move(sgd), options,
                                                /*target_epsilon=*/2.0, /*delta=*/1e-5,
                                                /*epochs=*/2);
  if (!training.ok()) return std::cerr << training.status() << "\n", 1;
  for (int step = 0; step < 40; ++step) {  // 2 epochs of 20 batches: backward of the SUM
    auto batch = (*training)->NextBatch();
    if (!batch.ok()) return std::cerr << batch.status() << "\n", 1;
    torch::Tensor logits = model.forward(x.index_select(0, *batch));
    nn::functional::cross_entropy(logits, y.index_select(0, *batch), kSum).backward();
    auto stepped = (*training)->Step();  // clips each example, adds noise, updates
    if (!stepped.ok()) return std::cerr << stepped.status() << "\n", 1;
  }
  torch::NoGradGuard no_grad;
  double accuracy = model.forward(x).argmax(1).eq(y).to(torch::kDouble).mean().item<double>();
  std::cout << "sigma " << (*training)->noise_multiplier() << ", training accuracy " << accuracy
            << ", epsilon <= " << *(*training)->Epsilon(1e-5) << " (delta 1e-5)\n";
  return accuracy > 0.75 ? 0 : 1;  // the two classes are separable; chance is 0.5
}
