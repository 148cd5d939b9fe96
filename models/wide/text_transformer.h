// A transformer encoder text classifier written with plain torch::nn modules, the way a
// LibTorch user would write it, and made private by optim::ConvertToPerExample (the module
// replacement of MakePrivate, optim/torch/make_private.h): token and learned position
// embeddings (torch::nn::Embedding), `layers` pre-norm encoder blocks (Xiong et al. 2020,
// "On layer normalization in the transformer architecture", Fig. 1(b)):
//   h = h + Attention(LayerNorm(h), key padding mask)
//   h = h + Linear(GELU(Linear(LayerNorm(h))))
// a final LayerNorm, the mean over the review's non-padding positions, and a Linear head.
//
// Attention is dpkit's DpMultiheadAttention (its projections are per-example Linear rules;
// MakePrivate keeps Dp* layers as they are); every other parametrised module is a
// torch::nn::Embedding, Linear or LayerNorm that ConvertToPerExample replaces by its
// per-example rule sharing the same parameter tensors. Each replaceable layer sits in a
// torch::nn::Sequential, so the forward pass reaches the replacement through the module
// tree (a plain member holder would keep pointing to the original layer; see
// make_private.h).
//
// Padding: token id 0 (models/wide/imdb.h pads at the start). Padded positions are never
// attended to and are left out of the mean; the last position always counts, so an empty
// review (all padding) still has one key per query and a defined mean.
#ifndef DPKIT_MODELS_WIDE_TEXT_TRANSFORMER_H_
#define DPKIT_MODELS_WIDE_TEXT_TRANSFORMER_H_

#include <cstdint>

#include <torch/torch.h>

#include "dpkit/optim/torch/dp_attention.h"

namespace dpkit::models::wide {

struct TextTransformerOptions {
  int64_t vocabulary = 0;  // token ids in [0, vocabulary); 0 is padding
  int64_t length = 0;      // positions per sequence
  int64_t dim = 64;        // model width d
  int64_t heads = 4;       // attention heads (d % heads == 0)
  int64_t layers = 2;      // encoder blocks
  int64_t hidden = 128;    // feed-forward width
  int64_t classes = 2;
};

// One pre-norm encoder block.
class EncoderBlockImpl : public torch::nn::Module {
 public:
  EncoderBlockImpl(int64_t dim, int64_t heads, int64_t hidden);
  // h: (B, T, d); padding: bool (B, T), true where a position is padding.
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& padding);

 private:
  torch::nn::Sequential attention_norm_{nullptr}, feed_forward_norm_{nullptr};
  optim::DpMultiheadAttention attention_{nullptr};
  torch::nn::Sequential feed_forward_{nullptr};
};
TORCH_MODULE(EncoderBlock);

class TextTransformerImpl : public torch::nn::Module {
 public:
  explicit TextTransformerImpl(const TextTransformerOptions& options);
  // tokens: int64 (B, length) -> logits (B, classes).
  torch::Tensor forward(const torch::Tensor& tokens);

 private:
  TextTransformerOptions options_;
  torch::nn::Sequential tokens_{nullptr}, positions_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::Sequential final_norm_{nullptr}, head_{nullptr};
};
TORCH_MODULE(TextTransformer);

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_TEXT_TRANSFORMER_H_
