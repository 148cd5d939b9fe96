// LibTorch layers that know their per-example gradients.
//
// DP-SGD needs, for every example i of a batch, the gradient g_i of its own loss (or at
// least its L2 norm, to clip it). These layers compute that from ONE backward pass of the
// summed loss sum_i L_i: each layer is a custom autograd function that keeps its input
// activation a_i in forward and the backprop dL/dz_i of its output in backward, and skips
// the ordinary (summed) weight gradient, which DpOptimizer computes afterwards with each
// example's clip factor folded in (Bu et al. 2022, "book-keeping"). Per layer:
//   Linear     z = a W^T + b          per-example grad  G_i^T A_i   (T positions summed)
//   Conv2d     im2col U_i (Ckk x L)   per-example grad  G_i U_i^T
//   Embedding  rows x_t               per-example grad  sum_t e_{x_t} g_t^T  (sparse rows)
//   GroupNorm / LayerNorm affine      per-example grad  sum over positions of g * x_hat
// Norms use "ghost clipping" (Goodfellow 2015; Li et al. 2021, Sec. 4; Bu et al. 2022):
//   ||G_i^T A_i||_F^2 = <A_i A_i^T, G_i G_i^T>_F            (Li et al. 2021, eq. (4))
// which never materialises the (out x in) per-example gradient. Linear chooses the cheaper
// of ghost norms (cost T^2 (d + p)) and materialised gradients (cost T d p) per batch;
// Conv2d materialises unless its buffer would exceed kMaxPerExampleBufferBytes (with
// materialised gradients the clipped sum is a weighted sum of the buffer, with ghost norms
// a second product, so ghost norms only save memory). A per-example buffer lives from the
// norms to the clipped sum of a physical batch (ClearCapture releases it), so it never
// adds to the forward pass's peak memory.
//
// Activations, pooling, dropout-free reshapes and any other parameter-free module may sit
// between these layers: they act on each example separately, so autograd's backprops
// remain per-example. Layers that mix examples (BatchNorm) or have parameters without a
// rule are rejected by ValidateForPerExampleGradients before training.
//
// Contract: after a forward of a batch of B examples (dimension 0) and backward of the SUM
// of the per-example losses, each layer holds its capture until ClearCapture() or the
// next forward. Forward outside autograd (NoGradGuard / eval) captures nothing.
#ifndef DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYERS_H_
#define DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYERS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"

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

// ---------------------------------------------------------------------------------------
// Linear: input (B, in) or (B, T..., in). Weight init as torch::nn::Linear
// (U(-1/sqrt(in), 1/sqrt(in)) for weight and bias).
class DpLinearImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  DpLinearImpl(int64_t in_features, int64_t out_features);
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
  void ClearCapture() override;
  void SetNormMethod(NormMethod method) override { method_ = method; }
  std::string Describe() const override;

  torch::Tensor weight;  // (out, in)
  torch::Tensor bias;    // (out)

 private:
  // Activation as (B, T, in) and backprop as (B, T, out).
  torch::Tensor A() const;
  torch::Tensor G() const;
  bool UseGhost() const;
  int64_t in_features_, out_features_;
  NormMethod method_ = NormMethod::kAuto;
  LayerCapture capture_;
  torch::Tensor per_example_;  // reused (B, out, in) buffer
  bool per_example_valid_ = false;
};
TORCH_MODULE(DpLinear);

// ---------------------------------------------------------------------------------------
// Conv2d (groups 1, symmetric zero padding). Input (B, C, H, W). Init as torch::nn::Conv2d.
struct DpConv2dOptions {
  int64_t in_channels = 1, out_channels = 1;
  std::array<int64_t, 2> kernel_size = {1, 1};
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 2> padding = {0, 0};
  std::array<int64_t, 2> dilation = {1, 1};
};

class DpConv2dImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  // kAuto materialises per-example gradients up to this buffer size (see UseGhost).
  static constexpr int64_t kMaxPerExampleBufferBytes = int64_t{16} << 20;
  explicit DpConv2dImpl(const DpConv2dOptions& options);
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
  void ClearCapture() override;
  void SetNormMethod(NormMethod method) override { method_ = method; }
  std::string Describe() const override;
  const DpConv2dOptions& options() const { return options_; }

  torch::Tensor weight;  // (out, in, kh, kw)
  torch::Tensor bias;    // (out)

 private:
  // im2row: (b, C, H, W) -> (b, L, C*kh*kw), row (y, x) = receptive field of output (y, x).
  torch::Tensor UnfoldRows(const torch::Tensor& input) const;
  torch::Tensor UnfoldedRows();  // UnfoldRows of the whole capture, cached per capture
  int64_t UnfoldChunk() const;   // examples per im2row chunk (about 512 KiB)
  bool UseGhost() const;
  DpConv2dOptions options_;
  NormMethod method_ = NormMethod::kAuto;
  LayerCapture capture_;
  torch::Tensor unfolded_;
  torch::Tensor per_example_;  // reused (B, out, C*kh*kw) buffer
  bool per_example_valid_ = false;
};
TORCH_MODULE(DpConv2d);

// ---------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------
// The per-example layers of `model` in registration order (depth first), each with the
// module path (e.g. "conv1"). Fails, naming the module, when a module holds parameters
// without a per-example rule (BatchNorm: "use GroupNorm"), or mixes examples.
struct NamedPerExampleLayer {
  std::string name;
  PerExampleLayer* layer;
};
absl::Status ValidateForPerExampleGradients(torch::nn::Module& model,
                                            std::vector<NamedPerExampleLayer>* layers);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYERS_H_
