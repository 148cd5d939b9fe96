// LibTorch layers that know their per-example gradients.
//
// DP-SGD needs, for every example i of a batch, the gradient g_i of its own loss (or at
// least its L2 norm, to clip it). These layers compute that from ONE backward pass of the
// summed loss sum_i L_i: each layer is a custom autograd function that keeps its input
// activation a_i in forward and the backprop dL/dz_i of its output in backward, and skips
// the ordinary (summed) weight gradient, which DpOptimizer computes afterwards with each
// example's clip factor folded in (Bu et al. 2022, "book-keeping"). Per layer:
//   Linear     z = a W^T + b          per-example grad  G_i^T A_i   (T positions summed)
//   Conv1d / Conv2d  im2row U_i (L x Ck)  per-example grad  G_i U_i (per group for Conv1d)
//   Embedding  rows x_t               per-example grad  sum_t e_{x_t} g_t^T  (sparse rows)
//   GroupNorm / LayerNorm affine      per-example grad  sum over positions of g * x_hat
//   MultiheadAttention  in-projections of query / key / value rows, bias_k / bias_v, out_proj:
//                                     linear maps over positions (G^T A per block)
//   LSTM / GRU / RNN  x_t, h_{t-1}    per-example grads sum_t g_t x_t^T, sum_t g_t h_{t-1}^T
//                                     (and sum_t g_t m_t^T for an LSTM's projection)
// Norms use "ghost clipping" (Goodfellow 2015; Li et al. 2021, Sec. 4; Bu et al. 2022):
//   ||G_i^T A_i||_F^2 = <A_i A_i^T, G_i G_i^T>_F            (Li et al. 2021, eq. (4))
// which never materialises the (out x in) per-example gradient. Linear chooses the cheaper
// of ghost norms (cost T^2 (d + p)) and materialised gradients (cost T d p) per batch;
// Conv2d materialises unless its buffer would exceed kMaxPerExampleBufferBytes (with
// materialised gradients the clipped sum is a weighted sum of the buffer, with ghost norms
// a second product, so ghost norms only save memory). A per-example buffer lives from the
// norms to the clipped sum of a physical batch (ClearCapture releases it), so it never
// adds to the forward pass's peak memory.
//
// Activations, pooling, dropout-free reshapes and any other parameter-free module may sit
// between these layers: they act on each example separately, so autograd's backprops
// remain per-example. Layers that mix examples (BatchNorm) or have parameters without a
// rule are rejected by ValidateForPerExampleGradients before training.
//
// Contract: after a forward of a batch of B examples (dimension 0) and backward of the SUM
// of the per-example losses, each layer holds its capture until ClearCapture() or the
// next forward. Forward outside autograd (NoGradGuard / eval) captures nothing.
//
// Layout: per_example_layer.h (the interface), one header per rule (dp_linear.h,
// dp_conv1d.h, dp_conv2d.h, dp_embedding.h, dp_affine_norm.h for GroupNorm and LayerNorm,
// dp_attention.h for attention, dp_rnn.h for LSTM, GRU and RNN), their shared kernels in
// per_example_kernels.h and linear_pieces.h (internal); this header includes them all and
// adds the model check.
#ifndef DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYERS_H_
#define DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYERS_H_

#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "dpkit/optim/torch/dp_affine_norm.h"
#include "dpkit/optim/torch/dp_attention.h"
#include "dpkit/optim/torch/dp_conv1d.h"
#include "dpkit/optim/torch/dp_conv2d.h"
#include "dpkit/optim/torch/dp_embedding.h"
#include "dpkit/optim/torch/dp_linear.h"
#include "dpkit/optim/torch/dp_rnn.h"
#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

// The per-example layers of `model` in registration order (depth first), each with the
// module path (e.g. "conv1"). Fails, naming the module, when a module holds parameters
// without a per-example rule (BatchNorm: "use GroupNorm"), or mixes examples.
struct NamedPerExampleLayer {
  std::string name;
  PerExampleLayer* layer;
};
absl::Status ValidateForPerExampleGradients(torch::nn::Module& model,
                                            std::vector<NamedPerExampleLayer>* layers);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_PER_EXAMPLE_LAYERS_H_
