#include "dpkit/models/wide/text_transformer.h"

#include <vector>

namespace dpkit::models::wide {
namespace {

namespace nn = torch::nn;

nn::Sequential Norm(int64_t dim) {
  return nn::Sequential(nn::LayerNorm(nn::LayerNormOptions(std::vector<int64_t>{dim})));
}

}  // namespace

EncoderBlockImpl::EncoderBlockImpl(int64_t dim, int64_t heads, int64_t hidden)
    : attention_norm_(register_module("attention_norm", Norm(dim))),
      feed_forward_norm_(register_module("feed_forward_norm", Norm(dim))),
      attention_(register_module("attention", optim::DpMultiheadAttention(dim, heads))),
      feed_forward_(register_module(
          "feed_forward", nn::Sequential(nn::Linear(dim, hidden), nn::GELU(),
                                         nn::Linear(hidden, dim)))) {}

torch::Tensor EncoderBlockImpl::forward(const torch::Tensor& h, const torch::Tensor& padding) {
  // Xiong et al. 2020, Fig. 1(b): pre-norm residual branches.
  torch::Tensor x = h + attention_->forward(attention_norm_->forward(h), padding);
  return x + feed_forward_->forward(feed_forward_norm_->forward(x));
}

TextTransformerImpl::TextTransformerImpl(const TextTransformerOptions& options)
    : options_(options) {
  TORCH_CHECK(options.vocabulary > 0 && options.length > 0 && options.layers > 0 &&
                  options.hidden > 0 && options.classes > 0,
              "TextTransformer: sizes must be > 0");
  tokens_ = register_module("tokens",
                            nn::Sequential(nn::Embedding(options.vocabulary, options.dim)));
  positions_ = register_module("positions",
                               nn::Sequential(nn::Embedding(options.length, options.dim)));
  blocks_ = register_module("blocks", nn::ModuleList());
  for (int64_t i = 0; i < options.layers; ++i) {
    blocks_->push_back(EncoderBlock(options.dim, options.heads, options.hidden));
  }
  final_norm_ = register_module("final_norm", Norm(options.dim));
  head_ = register_module("head", nn::Sequential(nn::Linear(options.dim, options.classes)));
}

torch::Tensor TextTransformerImpl::forward(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(1) == options_.length &&
                  tokens.scalar_type() == torch::kLong,
              "TextTransformer: tokens must be int64 (B, ", options_.length, "), got ",
              tokens.sizes());
  const int64_t batch = tokens.size(0), length = options_.length;
  torch::Tensor padding = tokens.eq(0);
  padding.select(1, length - 1).fill_(false);  // the last position always counts
  torch::Tensor where =
      torch::arange(length, tokens.options()).unsqueeze(0).expand({batch, length}).contiguous();
  torch::Tensor h = tokens_->forward(tokens) + positions_->forward(where);
  for (const auto& block : *blocks_) h = block->as<EncoderBlockImpl>()->forward(h, padding);
  h = final_norm_->forward(h);
  // Mean over the non-padding positions (at least one per example).
  torch::Tensor keep = padding.logical_not().unsqueeze(-1).to(h.scalar_type());
  torch::Tensor pooled = (h * keep).sum(1) / keep.sum(1);
  return head_->forward(pooled);
}

}  // namespace dpkit::models::wide
