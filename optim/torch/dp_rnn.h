// DpLSTM, DpGRU and DpRNN: recurrent layers with per-example gradient rules (the interface
// in per_example_layer.h, the contract in per_example_layers.h), laid out and computed as
// torch::nn::LSTM / GRU / RNN (LibTorch 1.13's CPU path, aten/src/ATen/native/RNN.cpp: per
// layer and direction the input projection of all steps at once, then per step the
// recurrent projection and the cell; the reverse direction runs the steps backwards and its
// outputs are concatenated after the forward direction's), so MakePrivate can replace a
// torch::nn::LSTM, GRU or RNN by one sharing its parameter tensors (weight_ih_l{k},
// weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, weight_hr_l{k}, and the same with the suffix
// _reverse) whose forward outputs are the same bits.
//
// Per layer and direction, the gate pre-activations of step t are z_t = W_ih x_t + b_ih +
// W_hh h_{t-1} + b_hh (LSTM, RNN; GRU's new gate multiplies the recurrent part by the reset
// gate, so its two projections get different backprops). With G_ih = (dL/d(W_ih x_t +
// b_ih))_t and G_hh = (dL/d(W_hh h_{t-1} + b_hh))_t, each (T, gates * H) for one example, the
// per-example gradients are those of two linear maps over the T steps (Li et al. 2021,
// Sec. 4; linear_pieces.h):
//   W_ih: sum_t g_t x_t^T = G_ih^T X      b_ih: sum_t (G_ih)_t
//   W_hh: sum_t g_t h_{t-1}^T = G_hh^T H   b_hh: sum_t (G_hh)_t
// (for the LSTM and RNN G_hh = G_ih: z_t is their sum). An LSTM with projections
// (proj_size P > 0) outputs h_t = W_hr m_t with m_t = o_t * tanh(c_t) (Sak et al. 2014), a
// third linear map: W_hr: sum_t (dL/dh_t) m_t^T. The layer keeps X, the states H =
// (h_0, ..., h_{T-1}) entering each step (in time order for either direction), m_t and the
// backprops, and never produces the ordinary summed weight gradient (its projections return
// only the input gradient).
//
// Cost rule (kAuto, per projection and batch): ||G^T A||_F^2 by ghost norms
// <A A^T, G G^T>_F (Li et al. 2021, eq. (4), T^2 (d + p) multiply-adds per example) when
// T (d + p) < d p, else by materialising G^T A (T d p) and dropping it at once; the
// clip-factor-weighted sum is one GEMM over all B T steps, (G diag(s))^T A: the cost of the
// non-private weight gradient.
//
// Padding: forward_with_lengths takes each example's length; steps at or after it leave
// the hidden (and cell) state unchanged and output zeros, as torch's packed sequences do
// (the reverse direction thus starts at the example's last step), and their gate backprops
// are exactly zero (the state update is a select), so the padded steps' inputs add nothing
// to any per-example gradient.
//
// Supported: every option of torch::nn::LSTMOptions / GRUOptions / RNNOptions in 1.13 (any
// number of layers, bias or not, batch_first, dropout between layers applied as torch does,
// bidirectional, proj_size for the LSTM, tanh or relu for the RNN).
#ifndef DPKIT_OPTIM_TORCH_DP_RNN_H_
#define DPKIT_OPTIM_TORCH_DP_RNN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/linear_pieces.h"
#include "dpkit/optim/torch/per_example_layer.h"

namespace dpkit::optim {

struct DpRnnOptions {
  DpRnnOptions(int64_t input_size, int64_t hidden_size)
      : input_size(input_size), hidden_size(hidden_size) {}
  int64_t input_size;
  int64_t hidden_size;
  int64_t num_layers = 1;
  bool bias = true;           // b_ih and b_hh in every layer and direction
  bool batch_first = false;   // input and output (B, T, features) instead of (T, B, features)
  double dropout = 0;         // on each layer's output except the last, in training mode
  bool bidirectional = false; // a reverse direction per layer, outputs concatenated
  int64_t proj_size = 0;      // LSTM only: h_t = W_hr (o_t * tanh(c_t)), of size proj_size
};

// The recurrent cells: their gate count and step (LibTorch's LSTMCell, GRUCell and the
// simple RNN cell with tanh or relu).
enum class RecurrentCell { kLstm, kGru, kRnnTanh, kRnnRelu };

// The layers and per-example rules shared by DpLSTM, DpGRU and DpRNN.
class DpRecurrentBase : public torch::nn::Module, public PerExampleLayer {
 public:
  // torch::nn::LSTM's flat order (its registration order): per layer k and direction,
  // weight_ih, weight_hh, then bias_ih, bias_hh (with bias), then weight_hr (projections).
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
  int64_t gates() const;
  int64_t directions() const { return options_.bidirectional ? 2 : 1; }
  // The size of h_t: proj_size, or hidden_size without projections.
  int64_t output_size() const;
  // Every parameter's torch name and member, in registration order (MakePrivate adopts
  // the replaced module's tensors through them).
  std::vector<std::pair<std::string, torch::Tensor*>> NamedParameterSlots();

  // The parameters of layer k's direction d (0 forward, 1 reverse) at index k D + d
  // (registered as weight_ih_l{k}, or weight_ih_l{k}_reverse, ...): weight_ih (gates H,
  // in_k) with in_0 = input_size and in_k = D output_size() above, weight_hh (gates H,
  // output_size()), biases (gates H) or undefined, weight_hr (proj_size, H) or undefined.
  std::vector<torch::Tensor> weight_ih, weight_hh, bias_ih, bias_hh, weight_hr;

 protected:
  // Parameters initialised as torch's: U(-1/sqrt(H), 1/sqrt(H)) in registration order.
  DpRecurrentBase(RecurrentCell cell, const DpRnnOptions& options);

  // Runs the layers over `input` (the caller's layout) from `states` (per layer and
  // direction: {h} or {h, c}, each (B, .)); lengths: int64 (B) in [1, T], or undefined for
  // none. Returns the output in the caller's layout and the final states per layer and
  // direction.
  std::pair<torch::Tensor, std::vector<std::vector<torch::Tensor>>> Run(
      const torch::Tensor& input, std::vector<std::vector<torch::Tensor>> states,
      const torch::Tensor& lengths);
  // The initial states {h} or {h, c} per layer and direction: from (L D, B, .) tensors, or
  // zeros.
  std::vector<std::vector<torch::Tensor>> InitialStates(const torch::Tensor& input,
                                                        const std::vector<torch::Tensor>& given);

 private:
  // What one layer's direction keeps from a forward pass with autograd enabled (time-major,
  // steps in time order).
  struct Capture {
    torch::Tensor input;        // (T, B, in) the layer's input
    torch::Tensor hidden;       // (T, B, output_size) the state h entering each step
    torch::Tensor ih_backprop;  // (T, B, gates H) dL/d(W_ih x_t + b_ih)
    std::vector<torch::Tensor> hh_backprops;  // GRU: T x (B, gates H); else = ih_backprop
    torch::Tensor cell_output;                // projections: (T, B, H) m_t
    std::vector<torch::Tensor> hr_backprops;  // projections: T x (B, P) dL/dh_t
  };
  // Runs direction `cell` (= k D + d) of a layer over its input; returns its outputs
  // (T, B, output_size) and updates *state.
  torch::Tensor RunDirection(int64_t cell, const torch::Tensor& layer_input,
                             const torch::Tensor& valid_lengths,
                             std::vector<torch::Tensor>* state);
  // The step of `cell`: the next state from the precomputed input projection of step t
  // (slots: where the hh and hr projections keep their backprops, or null).
  std::vector<torch::Tensor> Step(int64_t cell, const torch::Tensor& projected_input,
                                  const std::vector<torch::Tensor>& state, torch::Tensor* hh_slot,
                                  torch::Tensor* hr_slot, torch::Tensor* cell_output);
  // Index of each cell's parameters in DpParameters(): the first is weight_ih.
  int ParameterIndex(int64_t cell) const;
  // Per cell, the ih, hh (and hr) pieces (built once per capture).
  const std::vector<per_example_internal::LinearPiece>& Pieces();

  RecurrentCell cell_;
  DpRnnOptions options_;
  NormMethod method_ = NormMethod::kAuto;
  std::vector<Capture> captures_;  // one per layer and direction, allocated once
  std::vector<per_example_internal::LinearPiece> pieces_;
};

// LSTM (Hochreiter & Schmidhuber 1997; LibTorch's gate order i, f, g, o).
class DpLSTMImpl : public DpRecurrentBase {
 public:
  explicit DpLSTMImpl(const DpRnnOptions& options)
      : DpRecurrentBase(RecurrentCell::kLstm, options) {}
  DpLSTMImpl(int64_t input_size, int64_t hidden_size)
      : DpLSTMImpl(DpRnnOptions(input_size, hidden_size)) {}
  // As torch::nn::LSTMImpl::forward: input (T, B, in) or (B, T, in) with batch_first,
  // hx_opt (h_0, c_0) of (L D, B, output_size) and (L D, B, H) (zeros when absent); returns
  // (output (.., D output_size), (h_n, c_n)).
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
  // As torch::nn::GRUImpl::forward: returns (output, h_n); hx (L D, B, H) or undefined.
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

// The simple recurrent layer h_t = tanh (or relu)(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)
// (Elman 1990), as torch::nn::RNN.
class DpRNNImpl : public DpRecurrentBase {
 public:
  explicit DpRNNImpl(const DpRnnOptions& options, bool relu = false)
      : DpRecurrentBase(relu ? RecurrentCell::kRnnRelu : RecurrentCell::kRnnTanh, options) {}
  DpRNNImpl(int64_t input_size, int64_t hidden_size)
      : DpRNNImpl(DpRnnOptions(input_size, hidden_size)) {}
  // As torch::nn::RNNImpl::forward: returns (output, h_n); hx (L D, B, H) or undefined.
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& input,
                                                   torch::Tensor hx = {});
  // Padded sequences, as DpLSTMImpl::forward_with_lengths.
  std::tuple<torch::Tensor, torch::Tensor> forward_with_lengths(const torch::Tensor& input,
                                                                const torch::Tensor& lengths,
                                                                torch::Tensor hx = {});

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(torch::Tensor())})
};
TORCH_MODULE(DpRNN);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_DP_RNN_H_
