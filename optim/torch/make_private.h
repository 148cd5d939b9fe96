// MakePrivate: DP-SGD for a model written with plain torch::nn modules (in the spirit of
// Opacus' make_private(module, optimizer, data_loader, noise_multiplier, max_grad_norm)).
//
// ConvertToPerExample walks the model's module tree (named_children: Sequential, ModuleList,
// ModuleDict, the user's own module classes) and replaces every torch::nn::Linear, Conv1d,
// Conv2d, Embedding, LayerNorm, GroupNorm, MultiheadAttention, LSTM, GRU and RNN by the
// per-example layer of the same configuration (DpLinear, DpConv1d, DpConv2d, DpEmbedding,
// DpLayerNorm, DpGroupNorm, DpTorchMultiheadAttention, DpLSTM, DpGRU, DpRNN;
// per_example_layers.h) that SHARES the original's parameter tensors: the same TensorImpls
// under the same names (in_proj_weight, out_proj.weight, weight_ih_l0_reverse,
// weight_hr_l0, ...), so named_parameters(), an optimizer built before the call, and
// checkpoints keep working, and the outputs are those of the original module (Linear on
// (B, in), Conv1d in every configuration, Conv2d, Embedding, MultiheadAttention's output
// and attention weights, LSTM / GRU / RNN bidirectional or projected: bit for bit, the same
// ops in the same order; the affine norms apply their affine after the normalisation, and
// Linear over (B, T, in) is one addmm where torch's is matmul then add: to rounding).
// MultiheadAttention keeps LibTorch 1.13's forward(query, key, value, key_padding_mask,
// need_weights, attn_mask, average_attn_weights) with (L, B, E) inputs (1.13 has no
// batch_first), kdim / vdim, bias(false), add_bias_kv, add_zero_attn and dropout.
// Dp* layers already in the model are kept. It refuses, with one line naming the module's
// path and what to use instead: BatchNorm (mixes examples), any other module with trainable
// parameters and no per-example rule (Conv3d, ConvTranspose*, Bilinear, PReLU, ...), a
// configuration the rules do not cover (Conv2d grouped, transposed or not zero-padded;
// Embedding with padding_idx / max_norm / sparse), frozen and trainable
// parameters in one layer, TransformerEncoderLayer / TransformerDecoderLayer (they call
// their layers through member holders, below), and a root that is itself such a layer (wrap
// it in a Sequential).
//
// A layer the user's class keeps in a plain member holder (`torch::nn::Linear fc{nullptr}`,
// called as `fc(x)`) cannot be made private, and MakePrivate does not try. Why (LibTorch
// 1.13; checked for every route):
//  - Redirecting the holder: the holder's shared_ptr lives at an unknown offset inside the
//    user's object (register_module keeps its own copy in the tree; Module has no record of
//    holders), so the conversion cannot reach it; and ModuleHolder<LinearImpl> calls
//    LinearImpl::forward, which is NOT virtual, so even an object of a derived type in the
//    holder would run torch's own forward.
//  - Converting the Impl in place (same object in holder and tree): an object's type cannot
//    change, and what LinearImpl::forward (or LSTMImpl's, through flat_weights_) reads of it
//    is only its parameter tensors: F::linear(input, weight, bias). MultiheadAttentionImpl's
//    likewise passes in_proj_weight and out_proj->weight to F::multi_head_attention_forward,
//    and TransformerEncoderLayer / DecoderLayer call their attention, Linear and LayerNorm
//    through member holders (hence their refusal).
//  - Substituting those tensors, or hooks on the original parameters: whatever sits in
//    `weight` receives in backward only dL/dW = sum_i G_i^T A_i, summed over the batch inside
//    linear's own backward (one matrix product), and the per-example norms ||G_i^T A_i|| are
//    not recoverable from the sum. They need each example's input A_i and output backprop G_i
//    of that call, which nothing outside LinearImpl::forward sees: LibTorch's C++ modules have
//    no forward hooks, and Python's __torch_function__ / TorchDispatchMode (Opacus' routes)
//    have no C++ counterpart. What remains is process-wide: an at::RecordFunction observer
//    (the profiler's per-op callback, asked for inputs and outputs) could spot aten::linear /
//    aten::lstm calls whose weight is a replaced parameter, keep the input and hook the
//    output; rejected, because it runs on every op of every thread of the process, copies
//    every op's arguments, and depends on which internal ops LibTorch's modules call.
//  - The one route left, a backward pass per example, is not what the user's single
//    backward() of the summed loss does.
// So a forward pass must reach the layers through the tree: a Sequential's forward (a
// member `torch::nn::Sequential fc{nullptr}` holding ONE layer, called as fc->forward(x),
// works: its list is updated; for attention `attn->forward<std::tuple<Tensor, Tensor>>(q, k,
// v, key_padding_mask)`, which calls the replacement with torch's arguments and defaults),
// a ModuleList / ModuleDict looked up at call time. A stale member holder cannot train
// silently without clipping: every replaced parameter (attention's out_proj included) gets
// an autograd hook that stops backward() with a one-line error if the parameter receives an
// ordinary (summed, unclipped) gradient, which happens only when the forward pass used it
// outside its per-example rule (a stale member holder, a tied weight used functionally).
//
// MakePrivate then returns PrivateTraining: the DpOptimizer (optim/torch/dp_optimizer.h)
// around the user's optimizer, Poisson batches of expected size B from the secure
// generator, and the certified epsilon of the steps taken. MakePrivateWithEpsilon first
// calibrates the noise multiplier for a budget (accounting/calibrate.h, PLD, certified).
#ifndef DPKIT_OPTIM_TORCH_MAKE_PRIVATE_H_
#define DPKIT_OPTIM_TORCH_MAKE_PRIVATE_H_

#include <cstdint>
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/optim/poisson_sampler.h"
#include "dpkit/optim/torch/dp_optimizer.h"

namespace dpkit::optim {

// Replaces the supported torch::nn modules of `model` by per-example layers sharing their
// parameters (see the file comment). On error nothing has been replaced.
absl::Status ConvertToPerExample(torch::nn::Module& model);

struct MakePrivateOptions {
  double noise_multiplier = 1.0;    // sigma >= 0 (0: clipping only, NOT private)
  double max_grad_norm = 1.0;       // the clip norm C > 0 of each example's whole gradient
  int64_t dataset_size = 0;         // n >= 1: the examples batches are drawn from
  int64_t expected_batch_size = 0;  // B in [1, n]: Poisson sampling rate q = B / n
};

// DP-SGD training of a converted model: draw a batch, run forward and backward of the SUM
// of its per-example losses, call Step().
class PrivateTraining {
 public:
  // The indices (int64, CPU) of the next Poisson batch (each example with probability q).
  absl::StatusOr<torch::Tensor> NextBatch();
  // Clips each example's gradient, adds secure Gaussian noise, applies the update.
  absl::StatusOr<DpStepResult> Step();
  // Certified upper bound (PLD accountant) of epsilon at `delta` after the steps taken.
  absl::StatusOr<double> Epsilon(double delta) const;

  DpOptimizer& optimizer() { return *optimizer_; }
  int64_t steps() const { return steps_; }
  double sampling_rate() const { return sampler_->sampling_rate(); }
  double noise_multiplier() const { return optimizer_->options().noise_multiplier; }

 private:
  friend absl::StatusOr<std::unique_ptr<PrivateTraining>> MakePrivate(
      torch::nn::Module&, std::unique_ptr<torch::optim::Optimizer>, const MakePrivateOptions&);
  PrivateTraining() = default;
  std::unique_ptr<DpOptimizer> optimizer_;
  std::optional<StepRecordSampler> sampler_;
  std::unique_ptr<mechanisms::RandomGenerator> sampling_rng_;
  int64_t steps_ = 0;
};

// ConvertToPerExample(model), then DP-SGD around `optimizer` (built by the caller over
// model.parameters(), before or after the call: the tensors are the same).
absl::StatusOr<std::unique_ptr<PrivateTraining>> MakePrivate(
    torch::nn::Module& model, std::unique_ptr<torch::optim::Optimizer> optimizer,
    const MakePrivateOptions& options);

// MakePrivate with the smallest noise multiplier (within 0.1 %) whose certified epsilon at
// `delta` after `epochs` passes (ceil(epochs n / B) steps) is at most `target_epsilon`;
// options.noise_multiplier is ignored.
absl::StatusOr<std::unique_ptr<PrivateTraining>> MakePrivateWithEpsilon(
    torch::nn::Module& model, std::unique_ptr<torch::optim::Optimizer> optimizer,
    MakePrivateOptions options, double target_epsilon, double delta, double epochs);

}  // namespace dpkit::optim

namespace dpkit {
using optim::MakePrivate;
using optim::MakePrivateWithEpsilon;
}  // namespace dpkit

#endif  // DPKIT_OPTIM_TORCH_MAKE_PRIVATE_H_
