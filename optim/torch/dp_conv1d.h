// DpConv1d: torch::nn::Conv1d with per-example gradient rules (the interface in
// per_example_layer.h, the contract in per_example_layers.h).
//
// It takes torch::nn::Conv1dOptions and computes its forward with the ops
// torch::nn::Conv1dImpl::forward calls in LibTorch 1.13 (F::pad for the reflect, replicate
// and circular padding modes, then torch::conv1d with the same stride, padding, dilation
// and groups; padding "same" with an even total padding adds the extra zero on the right
// as aten's convolution does), so its outputs are the same bits as torch::nn::Conv1d's and
// MakePrivate can replace a Conv1d by one sharing its weight and bias.
//
// Rule: x_i is the convolution's (explicitly padded) input of example i and U_i its im2row
// (L output positions x C*k, per_example_kernels.h; a length-L sequence is an image of
// height 1). With groups G, output channels [j o, (j + 1) o) of group j see input
// channels [j c, (j + 1) c) only, i.e. columns [j c k, (j + 1) c k) of U_i, so the
// per-example weight gradient of group j is G_ij U_ij (G_ij the group's backprop rows,
// o x L) and the bias gradient the row sums of the backprop. Norms are materialised (the
// clipped sum is then a weighted sum of the buffer) unless the per-example buffer would
// exceed kMaxPerExampleBufferBytes and ghost norms sum_j <U_ij U_ij^T, G_ij^T G_ij>_F
// (Li et al. 2021, eq. (4), per group) are cheaper, as for DpConv2d (dp_conv2d.h).
#ifndef DPKIT_OPTIM_TORCH_DP_CONV1D_H_
#define DPKIT_OPTIM_TORCH_DP_CONV1D_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

class DpConv1dImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  static constexpr int64_t kMaxPerExampleBufferBytes = int64_t{16} << 20;
  // Any stride, dilation, groups, bias or none, padding as numbers, "valid" or "same",
  // padding_mode zeros / reflect / replicate / circular. Parameters initialised as
  // torch::nn::Conv1d's (kaiming_uniform_ with a = sqrt(5), bias U(-1/sqrt(fan_in), ..)),
  // so the same seed gives the same values.
  explicit DpConv1dImpl(const torch::nn::Conv1dOptions& options);
  // (B, C_in, L) -> (B, C_out, L_out); a batch is required (no unbatched (C_in, L) input).
  torch::Tensor forward(const torch::Tensor& input);

  std::vector<torch::Tensor> DpParameters() override;
  bool HasCapture() const override { return capture_.backprop.defined(); }
  int64_t CapturedBatchSize() const override { return capture_.activation.size(0); }
  void AppendSquaredNorms(std::vector<torch::Tensor>* out) override;
  std::vector<torch::Tensor> PerExampleGradients() override;
  void AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                    std::vector<torch::Tensor>* out) override;
  void AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                             std::vector<torch::Tensor>* sums) override;
  void ClearCapture() override;
  void SetNormMethod(NormMethod method) override { method_ = method; }
  std::string Describe() const override;
  const torch::nn::Conv1dOptions& options() const { return options_; }

  torch::Tensor weight;  // (out, in / groups, k)
  torch::Tensor bias;    // (out), undefined with bias(false)

 private:
  // im2row of x (b, C, L) with the convolution's own zero padding: (b, L_out, C k).
  torch::Tensor UnfoldRows(const torch::Tensor& x) const;
  torch::Tensor UnfoldedRows();  // of the whole capture, cached per capture
  int64_t UnfoldChunk() const;   // examples per im2row chunk (about 512 KiB)
  bool UseGhost() const;
  torch::nn::Conv1dOptions options_;
  // The padding torch::nn::Conv1d applies before and after each sequence, and the part of
  // it that is the convolution's own zero padding (all of it in mode zeros, else none: the
  // input is padded by F::pad first); conv_right_ - conv_left_ is 0 or 1 ("same").
  int64_t pad_left_ = 0, pad_right_ = 0;
  int64_t conv_left_ = 0, conv_right_ = 0;
  NormMethod method_ = NormMethod::kAuto;
  LayerCapture capture_;
  torch::Tensor unfolded_;
  torch::Tensor per_example_;  // reused (B, out, in / groups * k) buffer
  bool per_example_valid_ = false;
};
TORCH_MODULE(DpConv1d);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_CONV1D_H_
