#include "dpkit/optim/torch/dp_attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim {
namespace {

namespace F = torch::nn::functional;
using per_example_internal::AddPieceScaledGradientSums;
using per_example_internal::AppendPieceMicrobatchSquaredNorms;
using per_example_internal::AppendPieceSquaredNorms;
using per_example_internal::BatchMajor;
using per_example_internal::CapturedLinear;
using per_example_internal::CheckCapture;
using per_example_internal::LinearPiece;
using per_example_internal::PiecePerExampleGradients;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// bias.repeat({1, B, 1}) for bias (1, 1, E) — the op torch's attention appends bias_k and
// bias_v with — whose backward keeps dL/d(output) (1, B, E), each example's gradient of the
// bias, in *slot and gives the bias no ordinary gradient.
struct CapturedRepeatFunction : public torch::autograd::Function<CapturedRepeatFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& bias, int64_t batch,
                               int64_t slot) {
    ctx->saved_data["slot"] = slot;
    return bias.repeat({1, batch, 1});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    *reinterpret_cast<torch::Tensor*>(static_cast<intptr_t>(ctx->saved_data["slot"].toInt())) =
        grad_outputs[0];
    return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

torch::Tensor CapturedRepeat(const torch::Tensor& bias, int64_t batch, torch::Tensor* slot) {
  if (!torch::GradMode::is_enabled()) return bias.repeat({1, batch, 1});
  return CapturedRepeatFunction::apply(bias, batch,
                                       static_cast<int64_t>(reinterpret_cast<intptr_t>(slot)));
}

// Appends a zero column to a (N, S) mask, as torch's attention does for bias_k / zero
// attention.
torch::Tensor PadMask(const torch::Tensor& mask) {
  return torch::cat(
      {mask, torch::zeros({mask.size(0), 1},
                          at::TensorOptions(mask.dtype()).device(mask.device()))},
      /*dim=*/1);
}

// The backprop of a capture, or zeros of `like`'s (T, B) and `width` where the output did
// not reach the loss.
torch::Tensor BackpropOrZeros(const torch::Tensor& backprop, const torch::Tensor& input,
                              int64_t width) {
  if (backprop.defined()) return backprop;
  return torch::zeros({input.size(0), input.size(1), width}, input.options());
}

}  // namespace

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

DpTimeMajorLinearImpl::DpTimeMajorLinearImpl(int64_t in_features, int64_t out_features,
                                             bool bias_enabled)
    : in_features_(in_features), out_features_(out_features) {
  TORCH_CHECK(in_features > 0 && out_features > 0, "DpTimeMajorLinear: sizes must be > 0");
  // torch::nn::LinearImpl::reset_parameters, op for op.
  weight = register_parameter("weight", torch::empty({out_features, in_features}));
  torch::nn::init::kaiming_uniform_(weight, /*a=*/std::sqrt(5));
  if (bias_enabled) {
    bias = register_parameter("bias", torch::empty({out_features}));
    const int64_t fan_in = std::get<0>(torch::nn::init::_calculate_fan_in_and_fan_out(weight));
    const double bound = 1 / std::sqrt(fan_in);
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

torch::Tensor DpTimeMajorLinearImpl::forward(const torch::Tensor& input) {
  TORCH_CHECK(input.dim() == 3 && input.size(2) == in_features_, Describe(),
              ": input must be (T, B, ", in_features_, "), got ", input.sizes());
  ClearCapture();
  if (torch::GradMode::is_enabled()) capture_.activation = input.detach();
  return CapturedLinear(input, weight, bias, &capture_.backprop);
}

std::vector<torch::Tensor> DpTimeMajorLinearImpl::DpParameters() {
  if (bias.defined()) return {weight, bias};
  return {weight};
}

const std::vector<LinearPiece>& DpTimeMajorLinearImpl::Pieces() {
  CheckCapture(*this);
  if (pieces_.empty()) {
    pieces_.push_back({BatchMajor(capture_.activation), BatchMajor(capture_.backprop), 0, 0,
                       bias.defined() ? 1 : -1, 0});
  }
  return pieces_;
}

void DpTimeMajorLinearImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  AppendPieceSquaredNorms(DpParameters(), Pieces(), method_, out);
}

std::vector<torch::Tensor> DpTimeMajorLinearImpl::PerExampleGradients() {
  return PiecePerExampleGradients(DpParameters(), Pieces());
}

void DpTimeMajorLinearImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                         std::vector<torch::Tensor>* out) {
  AppendPieceMicrobatchSquaredNorms(DpParameters(), Pieces(), microbatches, method_, out);
}

void DpTimeMajorLinearImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                                  std::vector<torch::Tensor>* sums) {
  AddPieceScaledGradientSums(DpParameters(), Pieces(), scales, sums);
}

void DpTimeMajorLinearImpl::ClearCapture() {
  capture_.Clear();
  pieces_.clear();
}

std::string DpTimeMajorLinearImpl::Describe() const {
  return absl::StrCat("DpTimeMajorLinear(", in_features_, ", ", out_features_, ")");
}

DpTorchMultiheadAttentionImpl::DpTorchMultiheadAttentionImpl(
    const torch::nn::MultiheadAttentionOptions& options)
    : options_(options) {
  const int64_t e = options.embed_dim(), heads = options.num_heads();
  TORCH_CHECK(e > 0 && heads > 0 && e % heads == 0 && options.kdim() > 0 && options.vdim() > 0,
              "DpTorchMultiheadAttention: embed_dim must be a positive multiple of num_heads "
              "and kdim, vdim > 0, got ", e, ", ", heads, ", ", options.kdim(), ", ",
              options.vdim());
  TORCH_CHECK(options.dropout() >= 0 && options.dropout() < 1,
              "DpTorchMultiheadAttention: dropout must be in [0, 1)");
  same_embed_dim_ = options.kdim() == e && options.vdim() == e;
  // torch::nn::MultiheadAttentionImpl::reset and _reset_parameters, in their order: the
  // parameters, out_proj (initialised as a Linear), then xavier_uniform_ of the projection
  // weights, zero biases, xavier_normal_ of bias_k and bias_v.
  if (same_embed_dim_) {
    in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * e, e}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", torch::empty({e, e}));
    k_proj_weight = register_parameter("k_proj_weight", torch::empty({e, options.kdim()}));
    v_proj_weight = register_parameter("v_proj_weight", torch::empty({e, options.vdim()}));
  }
  if (options.bias()) in_proj_bias = register_parameter("in_proj_bias", torch::empty({3 * e}));
  out_proj = register_module("out_proj", DpTimeMajorLinear(e, e, options.bias()));
  if (options.add_bias_kv()) {
    bias_k = register_parameter("bias_k", torch::empty({1, 1, e}));
    bias_v = register_parameter("bias_v", torch::empty({1, 1, e}));
  }
  namespace init = torch::nn::init;
  if (same_embed_dim_) {
    init::xavier_uniform_(in_proj_weight);
  } else {
    init::xavier_uniform_(q_proj_weight);
    init::xavier_uniform_(k_proj_weight);
    init::xavier_uniform_(v_proj_weight);
  }
  if (in_proj_bias.defined()) {
    init::constant_(in_proj_bias, 0.);
    init::constant_(out_proj->bias, 0.);
  }
  if (bias_k.defined()) init::xavier_normal_(bias_k);
  if (bias_v.defined()) init::xavier_normal_(bias_v);
}

std::vector<std::pair<std::string, torch::Tensor*>>
DpTorchMultiheadAttentionImpl::NamedParameterSlots() {
  std::vector<std::pair<std::string, torch::Tensor*>> slots;
  if (same_embed_dim_) {
    slots.emplace_back("in_proj_weight", &in_proj_weight);
  } else {
    slots.emplace_back("q_proj_weight", &q_proj_weight);
    slots.emplace_back("k_proj_weight", &k_proj_weight);
    slots.emplace_back("v_proj_weight", &v_proj_weight);
  }
  if (options_.bias()) slots.emplace_back("in_proj_bias", &in_proj_bias);
  if (options_.add_bias_kv()) {
    slots.emplace_back("bias_k", &bias_k);
    slots.emplace_back("bias_v", &bias_v);
  }
  return slots;
}

std::vector<torch::Tensor> DpTorchMultiheadAttentionImpl::DpParameters() {
  std::vector<torch::Tensor> out;
  for (const auto& [name, slot] : NamedParameterSlots()) out.push_back(*slot);
  return out;
}

int DpTorchMultiheadAttentionImpl::WeightIndex(int which) const {
  return same_embed_dim_ ? 0 : which;
}

torch::Tensor DpTorchMultiheadAttentionImpl::Project(int n, const torch::Tensor& input,
                                                     int weight_index, int64_t weight_row,
                                                     int64_t bias_row, int64_t rows) {
  Projection& p = projections_[n];
  p.weight = weight_index, p.weight_row = weight_row, p.bias_row = bias_row, p.rows = rows;
  if (torch::GradMode::is_enabled()) p.input = input.detach();
  const torch::Tensor& w = *NamedParameterSlots()[weight_index].second;
  // torch slices only when it takes part of the weight (the self-attention case uses the
  // whole in_proj_weight and in_proj_bias).
  const bool whole = rows == w.size(0);
  torch::Tensor weight = whole ? w : w.slice(0, weight_row, weight_row + rows);
  torch::Tensor bias = in_proj_bias;
  if (bias.defined() && !(whole && same_embed_dim_)) {
    bias = bias.slice(0, bias_row, bias_row + rows);
  }
  return CapturedLinear(input, weight, bias, &p.backprop);
}

std::tuple<torch::Tensor, torch::Tensor> DpTorchMultiheadAttentionImpl::forward(
    const torch::Tensor& query, const torch::Tensor& key, const torch::Tensor& value,
    const torch::Tensor& key_padding_mask, bool need_weights, const torch::Tensor& attn_mask,
    bool average_attn_weights) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, Describe(),
              ": query, key and value must be (length, batch, features) (LibTorch 1.13's "
              "MultiheadAttention has no batch_first), got ", query.sizes(), ", ", key.sizes(),
              ", ", value.sizes());
  const int64_t tgt_len = query.size(0), bsz = query.size(1), embed_dim = query.size(2);
  TORCH_CHECK(embed_dim == options_.embed_dim() && key.sizes() == value.sizes() &&
                  key.size(1) == bsz,
              Describe(), ": query must be (L, B, ", options_.embed_dim(),
              ") and key, value of one shape (S, B, features), got ", query.sizes(), ", ",
              key.sizes(), ", ", value.sizes());
  ClearCapture();
  // LibTorch 1.13's F::detail::multi_head_attention_forward from here, op for op.
  const int64_t num_heads = options_.num_heads(), e = embed_dim;
  const auto head_dim = embed_dim / num_heads;
  const auto scaling = 1 / std::sqrt(head_dim);
  torch::Tensor q, k, v;
  if (same_embed_dim_ && torch::equal(query, key) && torch::equal(key, value)) {
    const auto chunks = Project(0, query, 0, 0, 0, 3 * e).chunk(3, /*dim=*/-1);
    q = chunks[0], k = chunks[1], v = chunks[2];
  } else if (same_embed_dim_ && torch::equal(key, value)) {
    q = Project(0, query, 0, 0, 0, e);
    const auto chunks = Project(1, key, 0, e, e, 2 * e).chunk(2, /*dim=*/-1);
    k = chunks[0], v = chunks[1];
  } else {
    q = Project(0, query, WeightIndex(0), 0, 0, e);
    k = Project(1, key, WeightIndex(1), same_embed_dim_ ? e : 0, e, e);
    v = Project(2, value, WeightIndex(2), same_embed_dim_ ? 2 * e : 0, 2 * e, e);
  }
  q = q * scaling;
  torch::Tensor attn_mask_ = attn_mask, key_padding_mask_ = key_padding_mask;
  if (bias_k.defined()) {
    k = torch::cat({k, CapturedRepeat(bias_k, bsz, &bias_k_backprop_)});
    v = torch::cat({v, CapturedRepeat(bias_v, bsz, &bias_v_backprop_)});
    if (attn_mask_.defined()) attn_mask_ = PadMask(attn_mask_);
    if (key_padding_mask_.defined()) key_padding_mask_ = PadMask(key_padding_mask_);
  }
  q = q.contiguous().view({tgt_len, bsz * num_heads, head_dim}).transpose(0, 1);
  k = k.contiguous().view({-1, bsz * num_heads, head_dim}).transpose(0, 1);
  v = v.contiguous().view({-1, bsz * num_heads, head_dim}).transpose(0, 1);
  auto src_len = k.size(1);
  if (key_padding_mask_.defined()) {
    TORCH_CHECK(key_padding_mask_.size(0) == bsz && key_padding_mask_.size(1) == src_len,
                Describe(), ": key_padding_mask must be (B, S)");
  }
  if (options_.add_zero_attn()) {
    src_len += 1;
    auto k_sizes = k.sizes().vec();
    k_sizes[1] = 1;
    k = torch::cat({k, torch::zeros(k_sizes, at::TensorOptions(k.dtype()).device(k.device()))},
                   /*dim=*/1);
    auto v_sizes = v.sizes().vec();
    v_sizes[1] = 1;
    v = torch::cat({v, torch::zeros(v_sizes, at::TensorOptions(v.dtype()).device(v.device()))},
                   /*dim=*/1);
    if (attn_mask_.defined()) attn_mask_ = PadMask(attn_mask_);
    if (key_padding_mask_.defined()) key_padding_mask_ = PadMask(key_padding_mask_);
  }
  auto attn_output_weights = torch::bmm(q, k.transpose(1, 2));
  if (attn_mask_.defined()) {
    attn_mask_ = attn_mask_.unsqueeze(0);
    attn_output_weights += attn_mask_;
  }
  if (key_padding_mask_.defined()) {
    attn_output_weights = attn_output_weights.view({bsz, num_heads, tgt_len, src_len});
    attn_output_weights = AT_DISPATCH_FLOATING_TYPES(
        attn_output_weights.scalar_type(), "attn_output_weights.masked_fill", [&]() {
          return attn_output_weights.masked_fill(key_padding_mask_.unsqueeze(1).unsqueeze(2),
                                                 -std::numeric_limits<scalar_t>::infinity());
        });
    attn_output_weights = attn_output_weights.view({bsz * num_heads, tgt_len, src_len});
  }
  attn_output_weights = F::softmax(attn_output_weights, /*dim=*/-1);
  attn_output_weights = F::dropout(
      attn_output_weights, F::DropoutFuncOptions().p(options_.dropout()).training(is_training()));
  auto attn_output = torch::bmm(attn_output_weights, v);
  attn_output = attn_output.transpose(0, 1).contiguous().view({tgt_len, bsz, embed_dim});
  attn_output = out_proj(attn_output);
  if (!need_weights) return std::make_tuple(attn_output, torch::Tensor());
  attn_output_weights = attn_output_weights.view({bsz, num_heads, tgt_len, src_len});
  if (average_attn_weights) attn_output_weights = attn_output_weights.sum(/*dim=*/1) / num_heads;
  return std::make_tuple(attn_output, attn_output_weights);
}

bool DpTorchMultiheadAttentionImpl::HasCapture() const {
  for (const Projection& p : projections_) {
    if (p.backprop.defined()) return true;
  }
  return bias_k_backprop_.defined() || bias_v_backprop_.defined();
}

const std::vector<LinearPiece>& DpTorchMultiheadAttentionImpl::Pieces() {
  CheckCapture(*this);
  if (!pieces_.empty()) return pieces_;
  const int bias_index = options_.bias() ? (same_embed_dim_ ? 1 : 3) : -1;
  for (const Projection& p : projections_) {
    if (!p.input.defined()) continue;
    torch::Tensor g = BatchMajor(BackpropOrZeros(p.backprop, p.input, p.rows));
    pieces_.push_back({BatchMajor(p.input), g, p.weight, p.weight_row, bias_index, p.bias_row});
  }
  if (bias_k.defined()) {
    const int first = bias_index >= 0 ? bias_index + 1 : (same_embed_dim_ ? 1 : 3);
    const torch::Tensor& like = projections_[0].input;  // (L, B, E): zeros of (1, B, E)
    const std::vector<torch::Tensor> backprops = {bias_k_backprop_, bias_v_backprop_};
    for (int j = 0; j < 2; ++j) {
      torch::Tensor g = BackpropOrZeros(backprops[j], like.narrow(0, 0, 1), options_.embed_dim());
      pieces_.push_back({torch::Tensor(), BatchMajor(g), -1, 0, first + j, 0});
    }
  }
  return pieces_;
}

void DpTorchMultiheadAttentionImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  AppendPieceSquaredNorms(DpParameters(), Pieces(), method_, out);
}

std::vector<torch::Tensor> DpTorchMultiheadAttentionImpl::PerExampleGradients() {
  return PiecePerExampleGradients(DpParameters(), Pieces());
}

void DpTorchMultiheadAttentionImpl::AppendMicrobatchSquaredNorms(
    const torch::Tensor& microbatches, std::vector<torch::Tensor>* out) {
  AppendPieceMicrobatchSquaredNorms(DpParameters(), Pieces(), microbatches, method_, out);
}

void DpTorchMultiheadAttentionImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                                          std::vector<torch::Tensor>* sums) {
  AddPieceScaledGradientSums(DpParameters(), Pieces(), scales, sums);
}

void DpTorchMultiheadAttentionImpl::ClearCapture() {
  projections_ = {};
  bias_k_backprop_ = bias_v_backprop_ = torch::Tensor();
  pieces_.clear();
}

void DpTorchMultiheadAttentionImpl::SetNormMethod(NormMethod method) { method_ = method; }

std::string DpTorchMultiheadAttentionImpl::Describe() const {
  return absl::StrCat("DpTorchMultiheadAttention(", options_.embed_dim(), ", ",
                      options_.num_heads(), ")");
}

}  // namespace dpkit::optim
