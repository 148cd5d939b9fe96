#include "dpkit/optim/torch/dp_rnn.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/optim/torch/linear_pieces.h"
#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim {
namespace {

using per_example_internal::AddPieceScaledGradientSums;
using per_example_internal::AppendPieceMicrobatchSquaredNorms;
using per_example_internal::AppendPieceSquaredNorms;
using per_example_internal::BatchMajor;
using per_example_internal::CapturedLinear;
using per_example_internal::CheckCapture;
using per_example_internal::LinearPiece;
using per_example_internal::PiecePerExampleGradients;

// The steps' backprops in time order as (T, B, p); a step whose projection received no
// gradient (its output did not reach the loss) contributes zero.
torch::Tensor StackSteps(std::vector<torch::Tensor> steps, const torch::Tensor& like) {
  for (torch::Tensor& s : steps) {
    if (!s.defined()) s = torch::zeros_like(like);
  }
  return torch::stack(steps, 0);
}

}  // namespace

DpRecurrentBase::DpRecurrentBase(RecurrentCell cell, const DpRnnOptions& options)
    : cell_(cell),
      options_(options),
      captures_(static_cast<size_t>(options.num_layers * (options.bidirectional ? 2 : 1))) {
  TORCH_CHECK(options.input_size > 0 && options.hidden_size > 0 && options.num_layers > 0,
              "DpLSTM/DpGRU/DpRNN: sizes and num_layers must be > 0");
  TORCH_CHECK(options.dropout >= 0 && options.dropout < 1,
              "DpLSTM/DpGRU/DpRNN: dropout must be in [0, 1)");
  TORCH_CHECK(options.proj_size >= 0 && options.proj_size < options.hidden_size,
              "DpLSTM: proj_size must be in [0, hidden_size)");
  TORCH_CHECK(options.proj_size == 0 || cell == RecurrentCell::kLstm,
              "DpGRU/DpRNN: proj_size is an LSTM option");
  const int64_t h = options.hidden_size, rows = gates() * h, out = output_size();
  // torch::nn::RNNImplBase::reset and reset_parameters: per layer and direction, registered
  // in this order, each U(-1/sqrt(H), 1/sqrt(H)) in registration order.
  const double bound = 1.0 / std::sqrt(static_cast<double>(h));
  auto make = [&](const std::string& name, std::vector<int64_t> shape) {
    return register_parameter(name, torch::empty(shape).uniform_(-bound, bound));
  };
  for (int64_t k = 0; k < options.num_layers; ++k) {
    for (int64_t d = 0; d < directions(); ++d) {
      const std::string suffix = absl::StrCat(k, d == 1 ? "_reverse" : "");
      const int64_t in = k == 0 ? options.input_size : out * directions();
      weight_ih.push_back(make(absl::StrCat("weight_ih_l", suffix), {rows, in}));
      weight_hh.push_back(make(absl::StrCat("weight_hh_l", suffix), {rows, out}));
      bias_ih.push_back(options.bias ? make(absl::StrCat("bias_ih_l", suffix), {rows})
                                     : torch::Tensor());
      bias_hh.push_back(options.bias ? make(absl::StrCat("bias_hh_l", suffix), {rows})
                                     : torch::Tensor());
      weight_hr.push_back(options.proj_size > 0
                              ? make(absl::StrCat("weight_hr_l", suffix), {options.proj_size, h})
                              : torch::Tensor());
    }
  }
}

int64_t DpRecurrentBase::gates() const {
  switch (cell_) {
    case RecurrentCell::kLstm: return 4;
    case RecurrentCell::kGru: return 3;
    default: return 1;
  }
}

int64_t DpRecurrentBase::output_size() const {
  return options_.proj_size > 0 ? options_.proj_size : options_.hidden_size;
}

std::vector<std::pair<std::string, torch::Tensor*>> DpRecurrentBase::NamedParameterSlots() {
  std::vector<std::pair<std::string, torch::Tensor*>> slots;
  for (int64_t k = 0; k < options_.num_layers; ++k) {
    for (int64_t d = 0; d < directions(); ++d) {
      const size_t c = static_cast<size_t>(k * directions() + d);
      const std::string suffix = absl::StrCat(k, d == 1 ? "_reverse" : "");
      slots.emplace_back(absl::StrCat("weight_ih_l", suffix), &weight_ih[c]);
      slots.emplace_back(absl::StrCat("weight_hh_l", suffix), &weight_hh[c]);
      if (options_.bias) {
        slots.emplace_back(absl::StrCat("bias_ih_l", suffix), &bias_ih[c]);
        slots.emplace_back(absl::StrCat("bias_hh_l", suffix), &bias_hh[c]);
      }
      if (options_.proj_size > 0) {
        slots.emplace_back(absl::StrCat("weight_hr_l", suffix), &weight_hr[c]);
      }
    }
  }
  return slots;
}

int DpRecurrentBase::ParameterIndex(int64_t cell) const {
  const int per_cell = 2 + (options_.bias ? 2 : 0) + (options_.proj_size > 0 ? 1 : 0);
  return static_cast<int>(cell) * per_cell;
}

std::vector<std::vector<torch::Tensor>> DpRecurrentBase::InitialStates(
    const torch::Tensor& input, const std::vector<torch::Tensor>& given) {
  const int64_t batch = input.size(options_.batch_first ? 0 : 1);
  const int64_t cells = options_.num_layers * directions();
  const size_t parts = cell_ == RecurrentCell::kLstm ? 2 : 1;
  // h has output_size() features, the LSTM's cell state c hidden_size.
  const std::vector<int64_t> widths = {output_size(), options_.hidden_size};
  std::vector<torch::Tensor> full = given;
  if (full.empty()) {
    for (size_t i = 0; i < parts; ++i) {
      full.push_back(torch::zeros({cells, batch, widths[i]},
                                  torch::dtype(input.dtype()).device(input.device())));
    }
  }
  TORCH_CHECK(full.size() == parts, Describe(), ": expected ", parts, " state tensors");
  std::vector<std::vector<torch::Tensor>> states(static_cast<size_t>(cells));
  for (size_t i = 0; i < parts; ++i) {
    const torch::Tensor& t = full[i];
    TORCH_CHECK(t.dim() == 3 && t.size(0) == cells && t.size(1) == batch && t.size(2) == widths[i],
                Describe(), ": initial states must be (", cells, ", ", batch, ", ", widths[i],
                "), got ", t.sizes());
    std::vector<torch::Tensor> per_cell = t.unbind(0);
    for (size_t c = 0; c < per_cell.size(); ++c) states[c].push_back(per_cell[c]);
  }
  return states;
}

std::vector<torch::Tensor> DpRecurrentBase::Step(int64_t cell,
                                                 const torch::Tensor& projected_input,
                                                 const std::vector<torch::Tensor>& state,
                                                 torch::Tensor* hh_slot, torch::Tensor* hr_slot,
                                                 torch::Tensor* cell_output) {
  const torch::Tensor& hx = state[0];
  const torch::Tensor& w_hh = weight_hh[cell];
  const torch::Tensor& b_hh = bias_hh[cell];
  if (cell_ == RecurrentCell::kLstm) {
    // LibTorch 1.13's LSTMCell (CPU, pre-computed input projection), op for op.
    const torch::Tensor gates = CapturedLinear(hx, w_hh, b_hh, hh_slot).add_(projected_input);
    std::vector<torch::Tensor> chunked = gates.unsafe_chunk(4, 1);
    torch::Tensor ingate = chunked[0].sigmoid_();
    torch::Tensor forgetgate = chunked[1].sigmoid_();
    torch::Tensor cellgate = chunked[2].tanh_();
    torch::Tensor outgate = chunked[3].sigmoid_();
    torch::Tensor cy = (forgetgate * state[1]).add_(ingate * cellgate);
    torch::Tensor hy = outgate * cy.tanh();
    if (weight_hr[cell].defined()) {
      // CellParams::matmul_hr: at::matmul(hy, w_hr^T), which torch::linear without a bias is.
      *cell_output = hy.detach();
      hy = CapturedLinear(hy, weight_hr[cell], torch::Tensor(), hr_slot);
    }
    return {hy, cy};
  }
  if (cell_ == RecurrentCell::kGru) {
    // LibTorch 1.13's GRUCell (CPU, pre-computed input projection), op for op.
    std::vector<torch::Tensor> igates = projected_input.unsafe_chunk(3, 1);
    std::vector<torch::Tensor> hgates = CapturedLinear(hx, w_hh, b_hh, hh_slot).unsafe_chunk(3, 1);
    const torch::Tensor reset_gate = hgates[0].add_(igates[0]).sigmoid_();
    const torch::Tensor input_gate = hgates[1].add_(igates[1]).sigmoid_();
    const torch::Tensor new_gate = igates[2].add(hgates[2].mul_(reset_gate)).tanh_();
    return {(hx - new_gate).mul_(input_gate).add_(new_gate)};
  }
  // LibTorch 1.13's SimpleCell: nonlinearity(linear_hh(h).add_(input projection)).
  torch::Tensor z = CapturedLinear(hx, w_hh, b_hh, hh_slot).add_(projected_input);
  return {cell_ == RecurrentCell::kRnnTanh ? at::tanh(z) : at::relu(z)};
}

torch::Tensor DpRecurrentBase::RunDirection(int64_t cell, const torch::Tensor& layer_input,
                                            const torch::Tensor& valid_lengths,
                                            std::vector<torch::Tensor>* state) {
  const bool record = torch::GradMode::is_enabled();
  const bool reverse = cell % directions() == 1;
  const bool gru = cell_ == RecurrentCell::kGru, projected = weight_hr[cell].defined();
  Capture& capture = captures_[cell];
  const int64_t steps = layer_input.size(0);
  torch::Tensor input_projection =
      CapturedLinear(layer_input, weight_ih[cell], bias_ih[cell], &capture.ih_backprop);
  if (record) {
    capture.input = layer_input.detach();
    if (gru) capture.hh_backprops.assign(static_cast<size_t>(steps), torch::Tensor());
    if (projected) capture.hr_backprops.assign(static_cast<size_t>(steps), torch::Tensor());
  }
  std::vector<torch::Tensor> step_inputs = input_projection.unbind(0);
  std::vector<torch::Tensor> outputs(steps), hidden_in(steps), cell_outputs(steps);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;  // FullBidirectionalLayer: reversed steps
    if (record) hidden_in[t] = (*state)[0].detach();
    torch::Tensor* hh_slot = record && gru ? &capture.hh_backprops[t] : nullptr;
    torch::Tensor* hr_slot = record && projected ? &capture.hr_backprops[t] : nullptr;
    std::vector<torch::Tensor> next =
        Step(cell, step_inputs[t], *state, hh_slot, hr_slot, &cell_outputs[t]);
    torch::Tensor output = next[0];
    if (valid_lengths.defined()) {
      // Steps at or after an example's length keep its state and output zeros; where()
      // routes exactly zero gradient to the unselected side.
      torch::Tensor valid = valid_lengths > t;
      for (size_t j = 0; j < next.size(); ++j) next[j] = torch::where(valid, next[j], (*state)[j]);
      output = torch::where(valid, next[0], torch::zeros_like(next[0]));
    }
    outputs[t] = output;
    *state = std::move(next);
  }
  if (record) {
    capture.hidden = torch::stack(hidden_in, 0);
    if (projected) capture.cell_output = torch::stack(cell_outputs, 0);
  }
  return torch::stack(outputs, 0);
}

std::pair<torch::Tensor, std::vector<std::vector<torch::Tensor>>> DpRecurrentBase::Run(
    const torch::Tensor& input, std::vector<std::vector<torch::Tensor>> states,
    const torch::Tensor& lengths) {
  TORCH_CHECK(input.dim() == 3 && input.size(2) == options_.input_size, Describe(),
              ": input must be ", options_.batch_first ? "(B, T, " : "(T, B, ",
              options_.input_size, "), got ", input.sizes());
  ClearCapture();
  torch::Tensor layer_input = options_.batch_first ? input.transpose(0, 1) : input;
  const int64_t steps = layer_input.size(0), batch = layer_input.size(1);
  TORCH_CHECK(steps > 0, Describe(), ": sequence length must be > 0");
  torch::Tensor valid_lengths;
  if (lengths.defined()) {
    TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == batch &&
                    lengths.scalar_type() == torch::kLong,
                Describe(), ": lengths must be int64 (B)");
    TORCH_CHECK(lengths.min().item<int64_t>() >= 1 && lengths.max().item<int64_t>() <= steps,
                Describe(), ": lengths must lie in [1, ", steps, "]");
    valid_lengths = lengths.to(input.device()).view({batch, 1});
  }
  for (int64_t k = 0; k < options_.num_layers; ++k) {
    std::vector<torch::Tensor> outputs;
    for (int64_t d = 0; d < directions(); ++d) {
      const int64_t cell = k * directions() + d;
      outputs.push_back(RunDirection(cell, layer_input, valid_lengths, &states[cell]));
    }
    // FullBidirectionalLayer: cat({forward, reverse}, last dimension).
    layer_input = outputs.size() == 1 ? outputs[0] : torch::cat(outputs, outputs[0].dim() - 1);
    if (options_.dropout != 0 && is_training() && k < options_.num_layers - 1) {
      layer_input = torch::dropout(layer_input, options_.dropout, /*train=*/true);
    }
  }
  return {options_.batch_first ? layer_input.transpose(0, 1) : layer_input, std::move(states)};
}

std::vector<torch::Tensor> DpRecurrentBase::DpParameters() {
  std::vector<torch::Tensor> out;
  for (const auto& [name, slot] : NamedParameterSlots()) out.push_back(*slot);
  return out;
}

bool DpRecurrentBase::HasCapture() const {
  // A direction whose outputs did not reach the loss has no backprop: zero gradients.
  for (const Capture& c : captures_) {
    if (c.ih_backprop.defined()) return true;
  }
  return false;
}

int64_t DpRecurrentBase::CapturedBatchSize() const { return captures_[0].input.size(1); }

const std::vector<LinearPiece>& DpRecurrentBase::Pieces() {
  CheckCapture(*this);
  if (!pieces_.empty()) return pieces_;
  for (size_t cell = 0; cell < captures_.size(); ++cell) {
    const Capture& c = captures_[cell];
    const int first = ParameterIndex(static_cast<int64_t>(cell));
    const int bias_ih_index = options_.bias ? first + 2 : -1;
    const int bias_hh_index = options_.bias ? first + 3 : -1;
    const int64_t steps = c.input.size(0), batch = c.input.size(1);
    torch::Tensor g_ih =
        c.ih_backprop.defined()
            ? BatchMajor(c.ih_backprop)
            : torch::zeros({batch, steps, gates() * options_.hidden_size}, c.input.options());
    torch::Tensor g_hh = g_ih;  // LSTM, RNN: the pre-activations' backprop is both's
    if (cell_ == RecurrentCell::kGru) {
      g_hh = BatchMajor(StackSteps(c.hh_backprops, g_ih.select(1, 0)));
    }
    pieces_.push_back({BatchMajor(c.input), g_ih, first, 0, bias_ih_index, 0});
    pieces_.push_back({BatchMajor(c.hidden), g_hh, first + 1, 0, bias_hh_index, 0});
    if (options_.proj_size > 0) {
      torch::Tensor g_hr = BatchMajor(
          StackSteps(c.hr_backprops, torch::zeros({batch, options_.proj_size}, c.input.options())));
      const int hr_index = first + (options_.bias ? 4 : 2);
      pieces_.push_back({BatchMajor(c.cell_output), g_hr, hr_index, 0, -1, 0});
    }
  }
  return pieces_;
}

void DpRecurrentBase::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  AppendPieceSquaredNorms(DpParameters(), Pieces(), method_, out);
}

std::vector<torch::Tensor> DpRecurrentBase::PerExampleGradients() {
  return PiecePerExampleGradients(DpParameters(), Pieces());
}

void DpRecurrentBase::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                   std::vector<torch::Tensor>* out) {
  AppendPieceMicrobatchSquaredNorms(DpParameters(), Pieces(), microbatches, method_, out);
}

void DpRecurrentBase::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                            std::vector<torch::Tensor>* sums) {
  AddPieceScaledGradientSums(DpParameters(), Pieces(), scales, sums);
}

void DpRecurrentBase::ClearCapture() {
  for (Capture& c : captures_) c = Capture();
  pieces_.clear();
}

std::string DpRecurrentBase::Describe() const {
  const char* name = cell_ == RecurrentCell::kLstm ? "DpLSTM("
                     : cell_ == RecurrentCell::kGru ? "DpGRU("
                                                    : "DpRNN(";
  return absl::StrCat(name, options_.input_size, ", ", options_.hidden_size, ", num_layers ",
                      options_.num_layers, options_.bidirectional ? ", bidirectional" : "",
                      options_.proj_size > 0 ? absl::StrCat(", proj_size ", options_.proj_size)
                                             : "",
                      ")");
}

std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> DpLSTMImpl::forward(
    const torch::Tensor& input, torch::optional<std::tuple<torch::Tensor, torch::Tensor>> hx_opt) {
  return forward_with_lengths(input, torch::Tensor(), std::move(hx_opt));
}

std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>>
DpLSTMImpl::forward_with_lengths(const torch::Tensor& input, const torch::Tensor& lengths,
                                 torch::optional<std::tuple<torch::Tensor, torch::Tensor>> hx_opt) {
  std::vector<torch::Tensor> given;
  if (hx_opt.has_value()) given = {std::get<0>(*hx_opt), std::get<1>(*hx_opt)};
  auto [output, states] = Run(input, InitialStates(input, given), lengths);
  std::vector<torch::Tensor> h, c;
  for (const auto& s : states) {
    h.push_back(s[0]);
    c.push_back(s[1]);
  }
  return {output, {torch::stack(h, 0), torch::stack(c, 0)}};
}

std::tuple<torch::Tensor, torch::Tensor> DpGRUImpl::forward(const torch::Tensor& input,
                                                            torch::Tensor hx) {
  return forward_with_lengths(input, torch::Tensor(), std::move(hx));
}

std::tuple<torch::Tensor, torch::Tensor> DpGRUImpl::forward_with_lengths(
    const torch::Tensor& input, const torch::Tensor& lengths, torch::Tensor hx) {
  std::vector<torch::Tensor> given;
  if (hx.defined()) given = {hx};
  auto [output, states] = Run(input, InitialStates(input, given), lengths);
  std::vector<torch::Tensor> h;
  for (const auto& s : states) h.push_back(s[0]);
  return {output, torch::stack(h, 0)};
}


std::tuple<torch::Tensor, torch::Tensor> DpRNNImpl::forward(const torch::Tensor& input,
                                                            torch::Tensor hx) {
  return forward_with_lengths(input, torch::Tensor(), std::move(hx));
}

std::tuple<torch::Tensor, torch::Tensor> DpRNNImpl::forward_with_lengths(
    const torch::Tensor& input, const torch::Tensor& lengths, torch::Tensor hx) {
  std::vector<torch::Tensor> given;
  if (hx.defined()) given = {hx};
  auto [output, states] = Run(input, InitialStates(input, given), lengths);
  std::vector<torch::Tensor> h;
  for (const auto& s : states) h.push_back(s[0]);
  return {output, torch::stack(h, 0)};
}

}  // namespace dpkit::optim
