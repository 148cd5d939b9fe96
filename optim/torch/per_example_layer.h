// The interface every layer with a per-example gradient rule implements (see
// per_example_layers.h for the rules and the contract of a captured pass).
//
// A layer keeps, from one forward pass with autograd enabled and one backward pass of the
// SUM of the per-example losses, its input activation and the backprop of its output
// (LayerCapture). From these it answers per-example squared norms (per example or per
// microbatch) and clip-factor-weighted gradient sums, without the ordinary summed weight
// gradient, which it never produces.
#ifndef DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYER_H_
#define DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace dpkit::optim {

// How a layer computes per-example norms.
enum class NormMethod {
  kAuto,         // the cheaper of the two, per batch (default)
  kGhost,        // Gram-matrix identity, no per-example gradient
  kMaterialize,  // per-example gradients in a buffer held until the clipped sum
};

// Interface of a layer with per-example gradient rules.
class PerExampleLayer {
 public:
  virtual ~PerExampleLayer() = default;
  // The layer's parameters, in a fixed order (weight, then bias where present).
  virtual std::vector<torch::Tensor> DpParameters() = 0;
  // True after a forward+backward with autograd enabled.
  virtual bool HasCapture() const = 0;
  // Batch size B of the captured pass.
  virtual int64_t CapturedBatchSize() const = 0;
  // Appends, for each parameter in DpParameters() order, the per-example squared L2
  // norms of its gradient, shape (B), float64 (sums of many squares lose little there).
  virtual void AppendSquaredNorms(std::vector<torch::Tensor>* out) = 0;
  // Per-example gradients, one tensor (B, *param.sizes()) per parameter (tests, and
  // small models; the Embedding rule builds dense tables here, so use it with care).
  virtual std::vector<torch::Tensor> PerExampleGradients() = 0;
  // Microbatches (a record = the examples of a microbatch together, optim/clipping.h):
  // for each parameter, the squared L2 norms of the SUM of the gradients of each
  // microbatch's examples, shape (M), float64. `microbatches` is int64 (M, n_max): row j
  // lists the batch indices of microbatch j, padded with the value B (no example). Ghost
  // norms treat a microbatch as one example whose positions are its examples' positions
  // (for Linear: sum_i G_i^T A_i = G_m^T A_m with A_m the stacked A_i).
  virtual void AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                            std::vector<torch::Tensor>* out) = 0;
  // For each parameter p (DpParameters() order) adds sum_i scales[p][i] * g_i(p) to
  // (*sums)[p] in place (no parameter-sized temporary for Linear and Embedding), where
  // scales[p] has shape (B) (the clip factors of the examples for that parameter).
  virtual void AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                     std::vector<torch::Tensor>* sums) = 0;
  // The same sums in fresh tensors (tests, diagnostics).
  std::vector<torch::Tensor> ScaledGradientSums(const std::vector<torch::Tensor>& scales);
  // Drops the captured activations and backprops.
  virtual void ClearCapture() = 0;
  virtual void SetNormMethod(NormMethod method) = 0;
  // A short name for messages ("DpLinear(784, 32)").
  virtual std::string Describe() const = 0;
};

// Capture shared by the layers' autograd functions.
struct LayerCapture {
  torch::Tensor activation;  // the layer input (or normalised input), detached
  torch::Tensor backprop;    // dL/d(output), set in backward
  void Clear() {
    activation = torch::Tensor();
    backprop = torch::Tensor();
  }
};

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYER_H_
