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

#include <cstdint>

#include <torch/torch.h>

#include "dpkit/optim/torch/dp_linear.h"

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

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_ATTENTION_H_
