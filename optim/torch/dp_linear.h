// DpLinear: a linear layer z = a W^T + b with per-example gradient rules (the interface in
// per_example_layer.h, the contract in per_example_layers.h).
//
// Per-example gradient of the weight: G_i^T A_i (the T positions of example i summed),
// of the bias: the sum of G_i's rows. Norms by ghost clipping,
//   ||G_i^T A_i||_F^2 = <A_i A_i^T, G_i G_i^T>_F            (Li et al. 2021, eq. (4)),
// which never materialises the (out x in) per-example gradient, or from materialised
// per-example gradients, whichever is cheaper per batch (kAuto; Li et al. 2021, Sec. 4:
// ghost norms cost T^2 (d + p) per example, materialising T d p).
#ifndef DPKIT_OPTIM_TORCH_DP_LINEAR_H_
#define DPKIT_OPTIM_TORCH_DP_LINEAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

// Linear: input (B, in) or (B, T..., in). Weight init as torch::nn::Linear
// (U(-1/sqrt(in), 1/sqrt(in)) for weight and bias). With has_bias false there is no bias
// parameter (torch::nn::LinearOptions::bias(false)): `bias` stays undefined and the layer's
// rules cover the weight alone.
class DpLinearImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  DpLinearImpl(int64_t in_features, int64_t out_features, bool has_bias = true);
  torch::Tensor forward(const torch::Tensor& input);

  std::vector<torch::Tensor> DpParameters() override;
  bool HasCapture() const override { return capture_.backprop.defined(); }
  int64_t CapturedBatchSize() const override;
  void AppendSquaredNorms(std::vector<torch::Tensor>* out) override;
  std::vector<torch::Tensor> PerExampleGradients() override;
  void AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                    std::vector<torch::Tensor>* out) override;
  void AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                             std::vector<torch::Tensor>* sums) override;
  void ClearCapture() override;
  void SetNormMethod(NormMethod method) override { method_ = method; }
  std::string Describe() const override;

  torch::Tensor weight;  // (out, in)
  torch::Tensor bias;    // (out), undefined without a bias

 private:
  // Activation as (B, T, in) and backprop as (B, T, out).
  torch::Tensor A() const;
  torch::Tensor G() const;
  bool UseGhost() const;
  int64_t in_features_, out_features_;
  bool has_bias_;
  NormMethod method_ = NormMethod::kAuto;
  LayerCapture capture_;
  torch::Tensor per_example_;  // reused (B, out, in) buffer
  bool per_example_valid_ = false;
};
TORCH_MODULE(DpLinear);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_LINEAR_H_
