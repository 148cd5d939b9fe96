// Per-example rules of layers whose parameters enter through linear maps over the
// positions of each example (LSTM / GRU projections, torch::nn::MultiheadAttention's
// in- and out-projections and bias_k / bias_v): the captured pieces, and the norms, clipped
// sums and gradients of the parameters they cover. Internal to optim/torch (BUILD
// visibility), beside per_example_kernels.h.
//
// A piece is one linear map of a layer's forward pass, out_t = W_b a_t + b_b at positions
// t = 1..T of an example, where W_b is a block of rows of one parameter and b_b the same
// entries of another. With A (T x d) the example's inputs and G (T x p) the backprops of
// the outputs, its per-example gradients are G^T A for the weight block and sum_t g_t for
// the bias block (Li et al. 2021, Sec. 4; the layer's own backward skips them). A
// parameter's per-example gradient is the sum over its pieces; the pieces of one parameter
// cover disjoint blocks here, so its squared norm is the sum of theirs. Norms of a weight
// block by ghost norms <A A^T, G G^T>_F (Li et al. 2021, eq. (4)) when T (d + p) < d p, else
// from the product (per_example_kernels.h's PositionSquaredNorms, kAuto); the clipped sum is
// one GEMM over all B T positions, the cost of the non-private weight gradient.
#ifndef DPKIT_OPTIM_TORCH_LINEAR_PIECES_H_
#define DPKIT_OPTIM_TORCH_LINEAR_PIECES_H_

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim::per_example_internal {

struct LinearPiece {
  torch::Tensor a;           // (B, T, d) inputs, batch-major; undefined for a bias-only piece
  torch::Tensor g;           // (B, T, p) backprops of the piece's outputs
  int weight = -1;           // index of the weight among the layer's parameters, or -1
  int64_t weight_row = 0;    // first row of the weight (viewed as (rows, d)) it covers
  int bias = -1;             // index of the bias (viewed as a vector), or -1
  int64_t bias_row = 0;      // first entry of the bias it covers
};

// (T, B, ...) time-major -> (B, T, ...) contiguous.
torch::Tensor BatchMajor(const torch::Tensor& t);

// Per parameter of `params` (the layer's DpParameters()), the per-example squared norms of
// its gradient, float64 (B), appended to *out.
void AppendPieceSquaredNorms(const std::vector<torch::Tensor>& params,
                             const std::vector<LinearPiece>& pieces, NormMethod method,
                             std::vector<torch::Tensor>* out);

// The same per microbatch (per_example_layer.h): a microbatch is one record whose positions
// are its examples' positions.
void AppendPieceMicrobatchSquaredNorms(const std::vector<torch::Tensor>& params,
                                       const std::vector<LinearPiece>& pieces,
                                       const torch::Tensor& microbatches, NormMethod method,
                                       std::vector<torch::Tensor>* out);

// Per parameter, (B, *param.sizes()).
std::vector<torch::Tensor> PiecePerExampleGradients(const std::vector<torch::Tensor>& params,
                                                    const std::vector<LinearPiece>& pieces);

// (*sums)[k] += sum_i scales[k][i] g_i(params[k]) in place (sums contiguous, params' shapes).
void AddPieceScaledGradientSums(const std::vector<torch::Tensor>& params,
                                const std::vector<LinearPiece>& pieces,
                                const std::vector<torch::Tensor>& scales,
                                std::vector<torch::Tensor>* sums);

// torch::linear(input, weight, bias) (bias may be undefined) — the op LibTorch's modules
// call, so the output is theirs bit for bit — whose backward returns dL/d(input) only and
// stores dL/d(output) in *backprop (unless null): the parameters get no ordinary gradient. Plain
// torch::linear when autograd does not record.
torch::Tensor CapturedLinear(const torch::Tensor& input, const torch::Tensor& weight,
                             const torch::Tensor& bias, torch::Tensor* backprop);

}  // namespace dpkit::optim::per_example_internal

#endif  // DPKIT_OPTIM_TORCH_LINEAR_PIECES_H_
