// DpLSTM and DpGRU: recurrent layers with per-example gradient rules (the interface in
// per_example_layer.h, the contract in per_example_layers.h), laid out and computed as
// torch::nn::LSTM / torch::nn::GRU (LibTorch 1.13's CPU path, aten/src/ATen/native/RNN.cpp:
// the input projection of all steps at once, then per step the recurrent projection and the
// cell), so MakePrivate can replace a torch::nn::LSTM or GRU by one sharing its parameter
// tensors (weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}) whose forward
// outputs are the same bits.
//
// Per layer, the gate pre-activations of step t are z_t = W_ih x_t + b_ih + W_hh h_{t-1} +
// b_hh (LSTM; GRU's new gate multiplies the recurrent part by the reset gate, so its two
// projections get different backprops). With G_ih = (dL/d(W_ih x_t + b_ih))_t and G_hh =
// (dL/d(W_hh h_{t-1} + b_hh))_t, each (T, gates * H) for one example, the per-example
// gradients are those of two linear layers over the T steps (Li et al. 2021, Sec. 4):
//   W_ih: sum_t g_t x_t^T = G_ih^T X      b_ih: sum_t (G_ih)_t
//   W_hh: sum_t g_t h_{t-1}^T = G_hh^T H   b_hh: sum_t (G_hh)_t
// (for the LSTM G_hh = G_ih: z_t is their sum). The layer keeps X, the hidden states
// H = (h_0, ..., h_{T-1}) entering each step and the backprops, and never produces the
// ordinary summed weight gradient (its projections return only the input gradient).
//
// Cost rule (kAuto, per projection and batch): the per-example squared norm of a weight
// ||G^T A||_F^2 costs T^2 (d + p) multiply-adds per example by ghost norms
// <A A^T, G G^T>_F (Li et al. 2021, eq. (4)) and T d p by materialising G^T A (d the
// projection's input size, p = gates * H), so ghost norms are used when T (d + p) < d p
// (short sequences, wide layers) and materialised products otherwise; a materialised
// product is dropped at once (never a (B, p, d) buffer held). The clip-factor-weighted sum
// is one GEMM over all B T steps, (G diag(s))^T A: the cost of the non-private weight
// gradient.
//
// Padding: forward_with_lengths takes each example's length; steps at or after it leave
// the hidden (and cell) state unchanged and output zeros, as torch's packed sequences do,
// and their gate backprops are exactly zero (the state update is a select), so the padded
// steps' inputs add nothing to any per-example gradient.
//
// Supported: any number of layers, batch_first, dropout between layers (applied as torch
// does, torch::dropout on a layer's output); not bidirectional, no projections (proj_size),
// biases always present.
#ifndef DPKIT_OPTIM_TORCH_DP_RNN_H_
#define DPKIT_OPTIM_TORCH_DP_RNN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

struct DpRnnOptions {
  DpRnnOptions(int64_t input_size, int64_t hidden_size)
      : input_size(input_size), hidden_size(hidden_size) {}
  int64_t input_size;
  int64_t hidden_size;
  int64_t num_layers = 1;
  bool batch_first = false;  // input and output (B, T, features) instead of (T, B, features)
  double dropout = 0;        // on each layer's output except the last, in training mode
};

// The two recurrent cells: their gate count and step (LibTorch's LSTMCell and GRUCell).
enum class RecurrentCell { kLstm, kGru };

// The layers and per-example rules shared by DpLSTM and DpGRU.
class DpRecurrentBase : public torch::nn::Module, public PerExampleLayer {
 public:
  // Per layer k, in this order (torch::nn::LSTM's flat order): weight_ih_l{k}, weight_hh_l{k},
  // bias_ih_l{k}, bias_hh_l{k}.
  std::vector<torch::Tensor> DpParameters() override;
  bool HasCapture() const override;
  int64_t CapturedBatchSize() const override;
  void AppendSquaredNorms(std::vector<torch::Tensor>* out) override;
  std::vector<torch::Tensor> PerExampleGradients() override;
  void AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                    std::vector<torch::Tensor>* out) override;
  void AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                             std::vector<torch::Tensor>* sums) override;
  void ClearCapture() override;
  void SetNormMethod(NormMethod method) override { method_ = method; }
  std::string Describe() const override;

  const DpRnnOptions& options() const { return options_; }
  int64_t gates() const { return cell_ == RecurrentCell::kLstm ? 4 : 3; }

  // Layer k's parameters (registered as weight_ih_l{k}, ...): weight_ih (gates H, in_k) with
  // in_0 = input_size and in_k = hidden_size above, weight_hh (gates H, H), biases (gates H).
  std::vector<torch::Tensor> weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  // Parameters initialised as torch's: U(-1/sqrt(H), 1/sqrt(H)) in registration order.
  DpRecurrentBase(RecurrentCell cell, const DpRnnOptions& options);

  // Runs the layers over `input` (the caller's layout) from `states` (per layer: {h} or
  // {h, c}, each (B, H)); lengths: int64 (B) in [1, T], or undefined for none. Returns the
  // output in the caller's layout and the final states per layer.
  std::pair<torch::Tensor, std::vector<std::vector<torch::Tensor>>> Run(
      const torch::Tensor& input, std::vector<std::vector<torch::Tensor>> states,
      const torch::Tensor& lengths);
  // The initial states {h} or {h, c} per layer: from (L, B, H) tensors, or zeros.
  std::vector<std::vector<torch::Tensor>> InitialStates(const torch::Tensor& input,
                                                        const std::vector<torch::Tensor>& given);

 private:
  // What one layer keeps from a forward pass with autograd enabled (time-major).
  struct Capture {
    torch::Tensor input;        // (T, B, in) the layer's input
    torch::Tensor hidden;       // (T, B, H) the hidden state entering each step
    torch::Tensor ih_backprop;  // (T, B, gates H) dL/d(W_ih x_t + b_ih)
    std::vector<torch::Tensor> hh_backprops;  // GRU: T x (B, gates H); LSTM: = ih_backprop
  };
  // One linear piece of a layer in batch-major layout: A (B, T, d), G (B, T, gates H).
  struct Piece {
    torch::Tensor a, g;
  };
  // The layer's step: the next state from the precomputed input projection of step t.
  std::vector<torch::Tensor> Step(int64_t layer, const torch::Tensor& projected_input,
                                  const std::vector<torch::Tensor>& state, torch::Tensor* slot);
  // Per layer, the ih piece then the hh piece (built once per capture).
  const std::vector<Piece>& Pieces();

  RecurrentCell cell_;
  DpRnnOptions options_;
  NormMethod method_ = NormMethod::kAuto;
  std::vector<Capture> captures_;  // one per layer, allocated once (stable addresses)
  std::vector<Piece> pieces_;
};

// LSTM (Hochreiter & Schmidhuber 1997; LibTorch's gate order i, f, g, o).
class DpLSTMImpl : public DpRecurrentBase {
 public:
  explicit DpLSTMImpl(const DpRnnOptions& options)
      : DpRecurrentBase(RecurrentCell::kLstm, options) {}
  DpLSTMImpl(int64_t input_size, int64_t hidden_size)
      : DpLSTMImpl(DpRnnOptions(input_size, hidden_size)) {}
  // As torch::nn::LSTMImpl::forward: input (T, B, in) or (B, T, in) with batch_first,
  // hx_opt (h_0, c_0) of (L, B, H) each (zeros when absent); returns
  // (output, (h_n, c_n)).
  std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> forward(
      const torch::Tensor& input,
      torch::optional<std::tuple<torch::Tensor, torch::Tensor>> hx_opt = {});
  // The same over padded sequences: lengths int64 (B) in [1, T]; outputs after an example's
  // length are zeros and (h_n, c_n) are its states after its last step (as torch's packed
  // sequences).
  std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> forward_with_lengths(
      const torch::Tensor& input, const torch::Tensor& lengths,
      torch::optional<std::tuple<torch::Tensor, torch::Tensor>> hx_opt = {});

 protected:
  FORWARD_HAS_DEFAULT_ARGS(
      {1, torch::nn::AnyValue(torch::optional<std::tuple<torch::Tensor, torch::Tensor>>())})
};
TORCH_MODULE(DpLSTM);

// GRU (Cho et al. 2014; LibTorch's gate order r, z, n).
class DpGRUImpl : public DpRecurrentBase {
 public:
  explicit DpGRUImpl(const DpRnnOptions& options)
      : DpRecurrentBase(RecurrentCell::kGru, options) {}
  DpGRUImpl(int64_t input_size, int64_t hidden_size)
      : DpGRUImpl(DpRnnOptions(input_size, hidden_size)) {}
  // As torch::nn::GRUImpl::forward: returns (output, h_n); hx (L, B, H) or undefined.
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& input,
                                                   torch::Tensor hx = {});
  // Padded sequences, as DpLSTMImpl::forward_with_lengths.
  std::tuple<torch::Tensor, torch::Tensor> forward_with_lengths(const torch::Tensor& input,
                                                                const torch::Tensor& lengths,
                                                                torch::Tensor hx = {});

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(torch::Tensor())})
};
TORCH_MODULE(DpGRU);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_RNN_H_
