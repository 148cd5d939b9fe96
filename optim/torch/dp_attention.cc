#include "dpkit/optim/torch/dp_attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace dpkit::optim {

torch::Tensor MultiHeadAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, int64_t num_heads,
                                 const torch::Tensor& key_padding_mask, bool causal) {
  const int64_t batch = q.size(0), length = q.size(1), dim = q.size(2);
  TORCH_CHECK(dim % num_heads == 0, "MultiHeadAttention: embed_dim ", dim,
              " is not a multiple of num_heads ", num_heads);
  const int64_t head_dim = dim / num_heads;
  // (B, T, d) -> (B, h, T, d_k)
  auto heads = [&](const torch::Tensor& x) {
    return x.reshape({batch, length, num_heads, head_dim}).transpose(1, 2);
  };
  // Vaswani et al. 2017, eq. (1): softmax(Q K^T / sqrt(d_k)) V.
  torch::Tensor scores =
      heads(q).matmul(heads(k).transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
  const double minus_inf = -std::numeric_limits<double>::infinity();
  if (key_padding_mask.defined()) {
    TORCH_CHECK(key_padding_mask.sizes() == torch::IntArrayRef({batch, length}) &&
                    key_padding_mask.scalar_type() == torch::kBool,
                "MultiHeadAttention: key_padding_mask must be bool (B, T)");
    scores = scores.masked_fill(key_padding_mask.view({batch, 1, 1, length}), minus_inf);
  }
  if (causal) {
    torch::Tensor future = torch::ones({length, length}, q.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, minus_inf);
  }
  torch::Tensor attended = torch::softmax(scores, -1).matmul(heads(v));
  return attended.transpose(1, 2).reshape({batch, length, dim});
}

DpMultiheadAttentionImpl::DpMultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
    : embed_dim_(embed_dim), num_heads_(num_heads) {
  TORCH_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0,
              "DpMultiheadAttention: embed_dim must be a positive multiple of num_heads, got ",
              embed_dim, " and ", num_heads);
  in_proj = register_module("in_proj", DpLinear(embed_dim, 3 * embed_dim));
  out_proj = register_module("out_proj", DpLinear(embed_dim, embed_dim));
}

torch::Tensor DpMultiheadAttentionImpl::forward(const torch::Tensor& x,
                                                const torch::Tensor& key_padding_mask,
                                                bool causal) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == embed_dim_,
              "DpMultiheadAttention: input must be (B, T, ", embed_dim_, "), got ", x.sizes());
  std::vector<torch::Tensor> qkv = in_proj(x).chunk(3, -1);
  return out_proj(MultiHeadAttention(qkv[0], qkv[1], qkv[2], num_heads_, key_padding_mask, causal));
}

}  // namespace dpkit::optim
