#include "dpkit/optim/torch/linear_pieces.h"

#include <cstdint>
#include <vector>

#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim::per_example_internal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CapturedLinearFunction : public torch::autograd::Function<CapturedLinearFunction> {
  // An undefined tensor cannot be an input of a custom function: the bias is optional.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias, int64_t slot) {
    ctx->saved_data["slot"] = slot;
    ctx->save_for_backward({weight});
    return torch::linear(input, weight, bias.has_value() ? *bias : torch::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    torch::Tensor g = grad_outputs[0];
    const int64_t slot = ctx->saved_data["slot"].toInt();
    if (slot != 0) *reinterpret_cast<torch::Tensor*>(static_cast<intptr_t>(slot)) = g;
    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) grad_input = g.matmul(ctx->get_saved_variables()[0]);
    return {grad_input, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// The weight block of `piece` in `t` (a tensor shaped as its weight): rows
// [weight_row, weight_row + p) of t viewed as (rows, d); with a leading batch dimension
// when `batched`.
torch::Tensor WeightBlock(const torch::Tensor& t, const torch::Tensor& weight,
                          const LinearPiece& piece, bool batched) {
  const int64_t p = piece.g.size(2);
  if (batched) return t.view({t.size(0), weight.size(0), -1}).narrow(1, piece.weight_row, p);
  return t.view({weight.size(0), -1}).narrow(0, piece.weight_row, p);
}

torch::Tensor BiasBlock(const torch::Tensor& t, const LinearPiece& piece, bool batched) {
  const int64_t p = piece.g.size(2);
  if (batched) return t.view({t.size(0), -1}).narrow(1, piece.bias_row, p);
  return t.view({-1}).narrow(0, piece.bias_row, p);
}

// Zeros (B) float64 per parameter, to which each piece adds its blocks' squared norms.
std::vector<torch::Tensor> ZeroNorms(size_t count, int64_t records, const LinearPiece& any) {
  std::vector<torch::Tensor> norms;
  for (size_t k = 0; k < count; ++k) {
    norms.push_back(torch::zeros({records}, any.g.options().dtype(torch::kFloat64)));
  }
  return norms;
}

}  // namespace

torch::Tensor BatchMajor(const torch::Tensor& t) { return t.transpose(0, 1).contiguous(); }

void AppendPieceSquaredNorms(const std::vector<torch::Tensor>& params,
                             const std::vector<LinearPiece>& pieces, NormMethod method,
                             std::vector<torch::Tensor>* out) {
  TORCH_CHECK(!pieces.empty(), "AppendPieceSquaredNorms: no pieces");
  std::vector<torch::Tensor> norms = ZeroNorms(params.size(), pieces[0].g.size(0), pieces[0]);
  for (const LinearPiece& piece : pieces) {
    if (piece.weight >= 0) norms[piece.weight].add_(PositionSquaredNorms(piece.a, piece.g, method));
    if (piece.bias >= 0) norms[piece.bias].add_(SquaredNorms(piece.g.sum(1)));
  }
  out->insert(out->end(), norms.begin(), norms.end());
}

void AppendPieceMicrobatchSquaredNorms(const std::vector<torch::Tensor>& params,
                                       const std::vector<LinearPiece>& pieces,
                                       const torch::Tensor& microbatches, NormMethod method,
                                       std::vector<torch::Tensor>* out) {
  TORCH_CHECK(!pieces.empty(), "AppendPieceMicrobatchSquaredNorms: no pieces");
  const int64_t m = microbatches.size(0);
  auto group = [&](const torch::Tensor& x) {
    return GroupRows(x, microbatches).reshape({m, -1, x.size(2)});
  };
  std::vector<torch::Tensor> norms = ZeroNorms(params.size(), m, pieces[0]);
  for (const LinearPiece& piece : pieces) {
    torch::Tensor g = group(piece.g);
    if (piece.weight >= 0) {
      norms[piece.weight].add_(PositionSquaredNorms(group(piece.a), g, method));
    }
    if (piece.bias >= 0) norms[piece.bias].add_(SquaredNorms(g.sum(1)));
  }
  out->insert(out->end(), norms.begin(), norms.end());
}

std::vector<torch::Tensor> PiecePerExampleGradients(const std::vector<torch::Tensor>& params,
                                                    const std::vector<LinearPiece>& pieces) {
  TORCH_CHECK(!pieces.empty(), "PiecePerExampleGradients: no pieces");
  const int64_t batch = pieces[0].g.size(0);
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : params) {
    std::vector<int64_t> shape = p.sizes().vec();
    shape.insert(shape.begin(), batch);
    grads.push_back(torch::zeros(shape, pieces[0].g.options()));
  }
  for (const LinearPiece& piece : pieces) {
    if (piece.weight >= 0) {
      WeightBlock(grads[piece.weight], params[piece.weight], piece, true)
          .add_(torch::bmm(piece.g.transpose(1, 2), piece.a));
    }
    if (piece.bias >= 0) BiasBlock(grads[piece.bias], piece, true).add_(piece.g.sum(1));
  }
  return grads;
}

void AddPieceScaledGradientSums(const std::vector<torch::Tensor>& params,
                                const std::vector<LinearPiece>& pieces,
                                const std::vector<torch::Tensor>& scales,
                                std::vector<torch::Tensor>* sums) {
  TORCH_CHECK(scales.size() == params.size() && sums->size() == params.size(),
              "AddPieceScaledGradientSums: expected ", params.size(), " scale vectors and sums");
  for (const LinearPiece& piece : pieces) {
    const int64_t batch = piece.g.size(0), p = piece.g.size(2);
    if (piece.weight >= 0) {
      // sum_i s_i G_i^T A_i as one GEMM over all positions of the batch, scaling the smaller.
      const int64_t d = piece.a.size(2);
      torch::Tensor s = scales[piece.weight].to(piece.g.scalar_type()).view({batch, 1, 1});
      torch::Tensor block = WeightBlock((*sums)[piece.weight], params[piece.weight], piece, false);
      if (d <= p) {
        block.addmm_(piece.g.reshape({-1, p}).t(), (piece.a * s).reshape({-1, d}));
      } else {
        block.addmm_((piece.g * s).reshape({-1, p}).t(), piece.a.reshape({-1, d}));
      }
    }
    if (piece.bias >= 0) {
      BiasBlock((*sums)[piece.bias], piece, false)
          .addmv_(piece.g.sum(1).t(), scales[piece.bias].to(piece.g.scalar_type()));
    }
  }
}

torch::Tensor CapturedLinear(const torch::Tensor& input, const torch::Tensor& weight,
                             const torch::Tensor& bias, torch::Tensor* backprop) {
  if (!torch::GradMode::is_enabled()) return torch::linear(input, weight, bias);
  const c10::optional<torch::Tensor> optional_bias =
      bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  return CapturedLinearFunction::apply(input, weight, optional_bias,
                                       static_cast<int64_t>(reinterpret_cast<intptr_t>(backprop)));
}

}  // namespace dpkit::optim::per_example_internal
