// DpGroupNorm and DpLayerNorm: normalisations whose affine weight and bias have
// per-example gradient rules (the interface in per_example_layer.h, the contract in
// per_example_layers.h).
//
// Normalisation is per example, so it does not mix examples; for y = x_hat * w + b the
// per-example gradients are sum over positions of g * x_hat (weight) and of g (bias), small
// enough (one entry per channel or normalised element) to be materialised.
#ifndef DPKIT_OPTIM_TORCH_DP_AFFINE_NORM_H_
#define DPKIT_OPTIM_TORCH_DP_AFFINE_NORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

// GroupNorm (input (B, C, ...), per-channel affine) and LayerNorm (affine over the last
// dims `normalized_shape`). Normalisation is per example, so it does not mix examples;
// the per-example rule is for the affine weight and bias. Init weight 1, bias 0.
class DpGroupNormImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  DpGroupNormImpl(int64_t num_groups, int64_t num_channels, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& input);

  std::vector<torch::Tensor> DpParameters() override { return {weight, bias}; }
  bool HasCapture() const override { return capture_.backprop.defined(); }
  int64_t CapturedBatchSize() const override;
  void AppendSquaredNorms(std::vector<torch::Tensor>* out) override;
  std::vector<torch::Tensor> PerExampleGradients() override;
  void AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                    std::vector<torch::Tensor>* out) override;
  void AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                             std::vector<torch::Tensor>* sums) override;
  void ClearCapture() override { capture_.Clear(); }
  void SetNormMethod(NormMethod) override {}
  std::string Describe() const override;

  torch::Tensor weight, bias;  // (C)

 private:
  int64_t num_groups_, num_channels_;
  double eps_;
  LayerCapture capture_;
};
TORCH_MODULE(DpGroupNorm);

class DpLayerNormImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  explicit DpLayerNormImpl(std::vector<int64_t> normalized_shape, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& input);

  std::vector<torch::Tensor> DpParameters() override { return {weight, bias}; }
  bool HasCapture() const override { return capture_.backprop.defined(); }
  int64_t CapturedBatchSize() const override;
  void AppendSquaredNorms(std::vector<torch::Tensor>* out) override;
  std::vector<torch::Tensor> PerExampleGradients() override;
  void AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                    std::vector<torch::Tensor>* out) override;
  void AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                             std::vector<torch::Tensor>* sums) override;
  void ClearCapture() override { capture_.Clear(); }
  void SetNormMethod(NormMethod) override {}
  std::string Describe() const override;

  torch::Tensor weight, bias;  // normalized_shape

 private:
  std::vector<int64_t> normalized_shape_;
  double eps_;
  LayerCapture capture_;
};
TORCH_MODULE(DpLayerNorm);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_AFFINE_NORM_H_
