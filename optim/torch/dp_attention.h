// Per-example-safe multi-head attention, two forms: DpMultiheadAttention, dpkit's compact
// batch-first self-attention, and DpTorchMultiheadAttention, torch::nn::MultiheadAttention's
// own options, parameters, signature and ops (what MakePrivate replaces it by; below).
//
// DpMultiheadAttention: multi-head self-attention that is safe for per-example gradients,
// built from DpLinear projections (as Opacus' DPMultiheadAttention): the query, key and
// value projections as one DpLinear(d, 3d), laid out as torch::nn::MultiheadAttention's
// in_proj_weight / in_proj_bias, and the output projection DpLinear(d, d).
//
// Attention mixes the positions of ONE sequence, never the examples of a batch: every
// operation between the projections (scaled dot products, masks, softmax, the weighted sum
// of values) acts on each example separately, so autograd's backprop into each projection's
// output is per example and the projections' rules (dp_linear.h: ghost norms
// <A_i A_i^T, G_i G_i^T>_F over the T positions, Li et al. 2021, eq. (4), or materialised
// gradients, whichever is cheaper for the layer) give exact per-example gradients. The
// module has no parameters of its own, so the model check (per_example_layers.h) and
// MakePrivate accept it as a container of two per-example layers. (The key bias gets no
// gradient: adding q.b_k to every score of a query leaves its softmax unchanged.)
#ifndef DPKIT_OPTIM_TORCH_DP_ATTENTION_H_
#define DPKIT_OPTIM_TORCH_DP_ATTENTION_H_

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/dp_linear.h"
#include "dpkit/optim/torch/linear_pieces.h"
#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

// softmax(Q K^T / sqrt(d_k) + mask) V per head (Vaswani et al. 2017, eq. (1)), with
// q, k, v of shape (B, T, d) split into `num_heads` heads of d_k = d / num_heads.
// key_padding_mask: bool (B, T), true where a position is padding (never attended to);
// undefined for none. causal: position t attends to positions <= t only. Each example
// needs at least one attendable key per query (else its softmax is undefined).
torch::Tensor MultiHeadAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, int64_t num_heads,
                                 const torch::Tensor& key_padding_mask, bool causal);

class DpMultiheadAttentionImpl : public torch::nn::Module {
 public:
  DpMultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads);
  // x: (B, T, embed_dim) -> (B, T, embed_dim); masks as for MultiHeadAttention.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_padding_mask = {},
                        bool causal = false);

  DpLinear in_proj{nullptr};   // (3d, d): rows [0, d) query, [d, 2d) key, [2d, 3d) value
  DpLinear out_proj{nullptr};  // (d, d)

 private:
  int64_t embed_dim_, num_heads_;
};
TORCH_MODULE(DpMultiheadAttention);

// A Linear over time-major (T, B, in) inputs, computed as torch::linear (the op
// torch::nn::MultiheadAttention applies to its output), bias optional, initialised as
// torch::nn::Linear; the per-example rule of DpLinear (ghost norms over the T positions or
// materialised, by cost) with the batch in dimension 1. DpTorchMultiheadAttention's out_proj.
class DpTimeMajorLinearImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  DpTimeMajorLinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  torch::Tensor forward(const torch::Tensor& input);  // (T, B, in) -> (T, B, out)

  std::vector<torch::Tensor> DpParameters() override;
  bool HasCapture() const override { return capture_.backprop.defined(); }
  int64_t CapturedBatchSize() const override { return capture_.activation.size(1); }
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
  torch::Tensor bias;    // (out), undefined without bias

 private:
  const std::vector<per_example_internal::LinearPiece>& Pieces();
  int64_t in_features_, out_features_;
  NormMethod method_ = NormMethod::kAuto;
  LayerCapture capture_;  // time-major activation and backprop
  std::vector<per_example_internal::LinearPiece> pieces_;
};
TORCH_MODULE(DpTimeMajorLinear);

// torch::nn::MultiheadAttention with per-example gradients, what MakePrivate puts in its
// place: the same options (embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn,
// kdim, vdim), parameter names and layout (in_proj_weight, or q_proj_weight, k_proj_weight
// and v_proj_weight when kdim or vdim differ from embed_dim; in_proj_bias; bias_k, bias_v;
// out_proj.weight, out_proj.bias), initialisation from the same seed, forward signature and
// defaults (query (L, B, E), key and value (S, B, kdim / vdim): LibTorch 1.13's module has no
// batch_first), and LibTorch 1.13's F::detail::multi_head_attention_forward op for op, so the
// outputs (and the attention weights, averaged over heads or not) are the same bits.
//
// Per-example rule: the in-projections are linear maps over the positions of each example
// (rows [0, E), [E, 2E), [2E, 3E) of in_proj_weight for query, key and value, one map of all
// rows when query, key and value are equal, as torch computes them), bias_k / bias_v are
// appended to each example's keys / values so their per-example gradients are the backprops
// of the appended position, and out_proj is a DpTimeMajorLinear child layer; everything in
// between (scaled dot products, key padding mask, attn_mask, softmax, dropout on the
// weights, zero attention) acts on each example separately, so the pieces' rules
// (linear_pieces.h; ghost norms over positions or materialised, Li et al. 2021) are exact.
class DpTorchMultiheadAttentionImpl : public torch::nn::Module, public PerExampleLayer {
 public:
  explicit DpTorchMultiheadAttentionImpl(const torch::nn::MultiheadAttentionOptions& options);
  DpTorchMultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : DpTorchMultiheadAttentionImpl(torch::nn::MultiheadAttentionOptions(embed_dim, num_heads)) {}
  // As torch::nn::MultiheadAttentionImpl::forward: (attention output (L, B, E), attention
  // weights (B, L, S), or (B, heads, L, S) without averaging, or undefined without
  // need_weights). key_padding_mask bool (B, S); attn_mask (L, S), added to the scores.
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& query,
                                                   const torch::Tensor& key,
                                                   const torch::Tensor& value,
                                                   const torch::Tensor& key_padding_mask = {},
                                                   bool need_weights = true,
                                                   const torch::Tensor& attn_mask = {},
                                                   bool average_attn_weights = true);

  // The rule covers the module's own parameters (out_proj is its own layer), in
  // registration order: in_proj_weight or q/k/v_proj_weight, in_proj_bias, bias_k, bias_v.
  std::vector<torch::Tensor> DpParameters() override;
  bool HasCapture() const override;
  int64_t CapturedBatchSize() const override { return projections_[0].input.size(1); }
  void AppendSquaredNorms(std::vector<torch::Tensor>* out) override;
  std::vector<torch::Tensor> PerExampleGradients() override;
  void AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                    std::vector<torch::Tensor>* out) override;
  void AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                             std::vector<torch::Tensor>* sums) override;
  void ClearCapture() override;
  void SetNormMethod(NormMethod method) override;
  std::string Describe() const override;
  const torch::nn::MultiheadAttentionOptions& options() const { return options_; }
  // The own parameters' torch names and members, in DpParameters() order.
  std::vector<std::pair<std::string, torch::Tensor*>> NamedParameterSlots();

  torch::Tensor in_proj_weight, in_proj_bias, bias_k, bias_v;
  torch::Tensor q_proj_weight, k_proj_weight, v_proj_weight;
  DpTimeMajorLinear out_proj{nullptr};

 protected:
  FORWARD_HAS_DEFAULT_ARGS({3, torch::nn::AnyValue(torch::Tensor())},
                           {4, torch::nn::AnyValue(true)},
                           {5, torch::nn::AnyValue(torch::Tensor())},
                           {6, torch::nn::AnyValue(true)})

 private:
  // One in-projection of a forward pass: input (T, B, d) and the backprop of its output.
  struct Projection {
    torch::Tensor input, backprop;
    int weight = -1;  // DpParameters() index of its weight
    int64_t weight_row = 0, bias_row = 0, rows = 0;
  };
  // The projection `n` (0..2): CapturedLinear of `input` by `rows` rows of weight
  // DpParameters()[weight_index] from weight_row, and of in_proj_bias from bias_row.
  torch::Tensor Project(int n, const torch::Tensor& input, int weight_index,
                        int64_t weight_row, int64_t bias_row, int64_t rows);
  int WeightIndex(int which) const;  // which: 0 in_proj / q, 1 k, 2 v
  const std::vector<per_example_internal::LinearPiece>& Pieces();
  torch::nn::MultiheadAttentionOptions options_;
  bool same_embed_dim_;
  NormMethod method_ = NormMethod::kAuto;
  std::array<Projection, 3> projections_;
  torch::Tensor bias_k_backprop_, bias_v_backprop_;
  std::vector<per_example_internal::LinearPiece> pieces_;
};
TORCH_MODULE(DpTorchMultiheadAttention);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_ATTENTION_H_
