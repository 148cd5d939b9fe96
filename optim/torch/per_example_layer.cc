#include "dpkit/optim/torch/per_example_layer.h"

#include <vector>

namespace dpkit::optim {

std::vector<torch::Tensor> PerExampleLayer::ScaledGradientSums(
    const std::vector<torch::Tensor>& scales) {
  std::vector<torch::Tensor> sums;
  for (const torch::Tensor& p : DpParameters()) {
    sums.push_back(torch::zeros(p.sizes(), p.options().requires_grad(false)));
  }
  AddScaledGradientSums(scales, &sums);
  return sums;
}

}  // namespace dpkit::optim
