// DpEmbedding: an embedding table with per-example gradient rules (the interface in
// per_example_layer.h, the contract in per_example_layers.h).
//
// Example i's gradient is sparse, sum_t e_{x_t} g_t^T over its positions t; its squared
// norm is a ghost norm, sum_{t,s} [x_t = x_s] <g_t, g_s> (Li et al. 2021, Sec. 4.2), and the
// clipped sum touches only the rows the batch uses (no table-sized temporary).
#ifndef DPKIT_OPTIM_TORCH_DP_EMBEDDING_H_
#define DPKIT_OPTIM_TORCH_DP_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

// Embedding: input int64 indices (B) or (B, T...); output (..., dim). Init N(0, 1).
// Norms are always ghost norms: sum_{t,s} [x_t = x_s] <g_t, g_s> (Li et al. 2021, Sec. 4.2).
class DpEmbeddingImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  DpEmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim);
  torch::Tensor forward(const torch::Tensor& indices);

  std::vector<torch::Tensor> DpParameters() override { return {weight}; }
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

  torch::Tensor weight;  // (num_embeddings, dim)

 private:
  int64_t num_embeddings_, embedding_dim_;
  LayerCapture capture_;
};
TORCH_MODULE(DpEmbedding);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_EMBEDDING_H_
