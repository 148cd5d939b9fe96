// Helpers of the per-example layer tests (testonly): each layer rule is checked against
// ordinary autograd run one example at a time on the same parameters.
#ifndef DPKIT_OPTIM_TORCH_PER_EXAMPLE_TESTING_H_
#define DPKIT_OPTIM_TORCH_PER_EXAMPLE_TESTING_H_

#include <functional>
#include <memory>
#include <utility>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layers.h"

namespace dpkit::optim {

// Largest absolute difference relative to the largest absolute reference value. The
// models run in float64, so 1e-5 measures the per-example rule, not float32 rounding
// (float64 accumulates ~1e-15 relative error in these small products).
double RelativeError(const torch::Tensor& actual, const torch::Tensor& expected);
inline constexpr double kTolerance = 1e-5;

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

// Per-example cross-entropy losses (reduction none).
torch::Tensor PerExampleLoss(const torch::Tensor& logits, const torch::Tensor& labels);

// Checks, for every layer and parameter: per-example gradients, their squared norms by
// every method (per example and per microbatch), and the clip-factor-weighted sum, against
// a batch-size-1 autograd loop, to kTolerance relative.
void CheckAgainstLoop(TestModel& model, const torch::Tensor& inputs, const torch::Tensor& labels);

// DpLinear(6, 5) then DpLinear(5, 3).
struct LinearNet : torch::nn::Module {
  DpLinear fc1{nullptr}, fc2{nullptr};
  LinearNet() {
    fc1 = register_module("fc1", DpLinear(6, 5));
    fc2 = register_module("fc2", DpLinear(5, 3));
  }
};

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_PER_EXAMPLE_TESTING_H_
