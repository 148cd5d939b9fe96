// DpConv2d: a 2-D convolution with per-example gradient rules (the interface in
// per_example_layer.h, the contract in per_example_layers.h).
//
// With U_i the im2row of example i (L output positions x C*kh*kw, per_example_kernels.h)
// and G_i its backprop (out x L), the per-example weight gradient is G_i U_i and the bias
// gradient the row sums of G_i. Norms are materialised (the clipped sum is then a weighted
// sum of the buffer) unless the per-example buffer would exceed kMaxPerExampleBufferBytes
// and ghost norms <U_i U_i^T, G_i^T G_i>_F (Li et al. 2021, eq. (4)) are cheaper.
#ifndef DPKIT_OPTIM_TORCH_DP_CONV2D_H_
#define DPKIT_OPTIM_TORCH_DP_CONV2D_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

// Conv2d (groups 1, symmetric zero padding). Input (B, C, H, W). Init as torch::nn::Conv2d.
struct DpConv2dOptions {
  int64_t in_channels = 1, out_channels = 1;
  std::array<int64_t, 2> kernel_size = {1, 1};
  std::array<int64_t, 2> stride = {1, 1};
  std::array<int64_t, 2> padding = {0, 0};
  std::array<int64_t, 2> dilation = {1, 1};
  bool bias = true;  // false: no bias parameter (torch::nn::Conv2dOptions::bias(false))
};

class DpConv2dImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  // kAuto materialises per-example gradients up to this buffer size (see UseGhost).
  static constexpr int64_t kMaxPerExampleBufferBytes = int64_t{16} << 20;
  explicit DpConv2dImpl(const DpConv2dOptions& options);
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
  const DpConv2dOptions& options() const { return options_; }

  torch::Tensor weight;  // (out, in, kh, kw)
  torch::Tensor bias;    // (out), undefined without a bias

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

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_CONV2D_H_
