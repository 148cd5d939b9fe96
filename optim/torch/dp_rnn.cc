#include "dpkit/optim/torch/dp_rnn.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim {
namespace {

using per_example_internal::CheckCapture;
using per_example_internal::GroupRows;
using per_example_internal::PositionSquaredNorms;
using per_example_internal::SquaredNorms;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t ToSlot(torch::Tensor* slot) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(slot));
}

// torch::linear(input, weight, bias) (the op LibTorch's CellParams::linear_ih/linear_hh
// call, so the output is the same bits) whose backward returns dL/d(input) only and keeps
// dL/d(output) in *slot (when slot is not 0): the weight gradient is assembled later from
// the captures with per-example clip factors.
struct ProjectionFunction : public torch::autograd::Function<ProjectionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t slot) {
    ctx->saved_data["slot"] = slot;
    ctx->save_for_backward({weight});
    return torch::linear(input, weight, bias);
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

// The projection, through ProjectionFunction when autograd records (slot may be null).
torch::Tensor Project(const torch::Tensor& input, const torch::Tensor& weight,
                      const torch::Tensor& bias, torch::Tensor* slot) {
  if (!torch::GradMode::is_enabled()) return torch::linear(input, weight, bias);
  return ProjectionFunction::apply(input, weight, bias, ToSlot(slot));
}

// (T, B, ...) time-major -> (B, T, ...) contiguous.
torch::Tensor BatchMajor(const torch::Tensor& t) { return t.transpose(0, 1).contiguous(); }

}  // namespace

DpRecurrentBase::DpRecurrentBase(RecurrentCell cell, const DpRnnOptions& options)
    : cell_(cell), options_(options), captures_(static_cast<size_t>(options.num_layers)) {
  TORCH_CHECK(options.input_size > 0 && options.hidden_size > 0 && options.num_layers > 0,
              "DpLSTM/DpGRU: sizes and num_layers must be > 0");
  TORCH_CHECK(options.dropout >= 0 && options.dropout < 1, "DpLSTM/DpGRU: dropout must be in [0, 1)");
  const int64_t h = options.hidden_size, rows = gates() * h;
  // torch::nn::RNNImplBase::reset_parameters: U(-1/sqrt(H), 1/sqrt(H)), registration order.
  const double bound = 1.0 / std::sqrt(static_cast<double>(h));
  auto make = [&](const std::string& name, std::vector<int64_t> shape) {
    return register_parameter(name, torch::empty(shape).uniform_(-bound, bound));
  };
  for (int64_t k = 0; k < options.num_layers; ++k) {
    const int64_t in = k == 0 ? options.input_size : h;
    weight_ih.push_back(make(absl::StrCat("weight_ih_l", k), {rows, in}));
    weight_hh.push_back(make(absl::StrCat("weight_hh_l", k), {rows, h}));
    bias_ih.push_back(make(absl::StrCat("bias_ih_l", k), {rows}));
    bias_hh.push_back(make(absl::StrCat("bias_hh_l", k), {rows}));
  }
}

std::vector<std::vector<torch::Tensor>> DpRecurrentBase::InitialStates(
    const torch::Tensor& input, const std::vector<torch::Tensor>& given) {
  const int64_t batch = input.size(options_.batch_first ? 0 : 1);
  const size_t parts = cell_ == RecurrentCell::kLstm ? 2 : 1;
  std::vector<torch::Tensor> full = given;
  if (full.empty()) {
    for (size_t i = 0; i < parts; ++i) {
      full.push_back(torch::zeros({options_.num_layers, batch, options_.hidden_size},
                                  torch::dtype(input.dtype()).device(input.device())));
    }
  }
  TORCH_CHECK(full.size() == parts, Describe(), ": expected ", parts, " state tensors");
  std::vector<std::vector<torch::Tensor>> states(static_cast<size_t>(options_.num_layers));
  for (const torch::Tensor& t : full) {
    TORCH_CHECK(t.dim() == 3 && t.size(0) == options_.num_layers && t.size(1) == batch &&
                    t.size(2) == options_.hidden_size,
                Describe(), ": initial states must be (", options_.num_layers, ", ", batch, ", ",
                options_.hidden_size, "), got ", t.sizes());
    std::vector<torch::Tensor> layers = t.unbind(0);
    for (size_t k = 0; k < layers.size(); ++k) states[k].push_back(layers[k]);
  }
  return states;
}

std::vector<torch::Tensor> DpRecurrentBase::Step(int64_t layer,
                                                 const torch::Tensor& projected_input,
                                                 const std::vector<torch::Tensor>& state,
                                                 torch::Tensor* slot) {
  const torch::Tensor& hx = state[0];
  if (cell_ == RecurrentCell::kLstm) {
    // LibTorch 1.13's LSTMCell (CPU, pre-computed input projection), op for op.
    const torch::Tensor gates =
        Project(hx, weight_hh[layer], bias_hh[layer], slot).add_(projected_input);
    std::vector<torch::Tensor> chunked = gates.unsafe_chunk(4, 1);
    torch::Tensor ingate = chunked[0].sigmoid_();
    torch::Tensor forgetgate = chunked[1].sigmoid_();
    torch::Tensor cellgate = chunked[2].tanh_();
    torch::Tensor outgate = chunked[3].sigmoid_();
    torch::Tensor cy = (forgetgate * state[1]).add_(ingate * cellgate);
    torch::Tensor hy = outgate * cy.tanh();
    return {hy, cy};
  }
  // LibTorch 1.13's GRUCell (CPU, pre-computed input projection), op for op.
  std::vector<torch::Tensor> igates = projected_input.unsafe_chunk(3, 1);
  std::vector<torch::Tensor> hgates =
      Project(hx, weight_hh[layer], bias_hh[layer], slot).unsafe_chunk(3, 1);
  const torch::Tensor reset_gate = hgates[0].add_(igates[0]).sigmoid_();
  const torch::Tensor input_gate = hgates[1].add_(igates[1]).sigmoid_();
  const torch::Tensor new_gate = igates[2].add(hgates[2].mul_(reset_gate)).tanh_();
  return {(hx - new_gate).mul_(input_gate).add_(new_gate)};
}

std::pair<torch::Tensor, std::vector<std::vector<torch::Tensor>>> DpRecurrentBase::Run(
    const torch::Tensor& input, std::vector<std::vector<torch::Tensor>> states,
    const torch::Tensor& lengths) {
  TORCH_CHECK(input.dim() == 3 && input.size(2) == options_.input_size, Describe(),
              ": input must be ", options_.batch_first ? "(B, T, " : "(T, B, ",
              options_.input_size, "), got ", input.sizes());
  ClearCapture();
  const bool record = torch::GradMode::is_enabled();
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
    Capture& capture = captures_[k];
    torch::Tensor projected = Project(layer_input, weight_ih[k], bias_ih[k], &capture.ih_backprop);
    const bool gru = cell_ == RecurrentCell::kGru;
    if (record) {
      capture.input = layer_input.detach();
      if (gru) capture.hh_backprops.assign(static_cast<size_t>(steps), torch::Tensor());
    }
    std::vector<torch::Tensor> step_inputs = projected.unbind(0), outputs, hidden_in;
    std::vector<torch::Tensor> state = states[k];
    for (int64_t t = 0; t < steps; ++t) {
      if (record) hidden_in.push_back(state[0].detach());
      torch::Tensor* slot = record && gru ? &capture.hh_backprops[t] : nullptr;
      std::vector<torch::Tensor> next = Step(k, step_inputs[t], state, slot);
      torch::Tensor output = next[0];
      if (valid_lengths.defined()) {
        // Steps at or after an example's length keep its state and output zeros; where()
        // routes exactly zero gradient to the unselected side.
        torch::Tensor valid = valid_lengths > t;
        for (size_t j = 0; j < next.size(); ++j) next[j] = torch::where(valid, next[j], state[j]);
        output = torch::where(valid, next[0], torch::zeros_like(next[0]));
      }
      outputs.push_back(output);
      state = std::move(next);
    }
    layer_input = torch::stack(outputs, 0);
    if (record) capture.hidden = torch::stack(hidden_in, 0);
    states[k] = std::move(state);
    if (options_.dropout != 0 && is_training() && k < options_.num_layers - 1) {
      layer_input = torch::dropout(layer_input, options_.dropout, /*train=*/true);
    }
  }
  return {options_.batch_first ? layer_input.transpose(0, 1) : layer_input, std::move(states)};
}

std::vector<torch::Tensor> DpRecurrentBase::DpParameters() {
  std::vector<torch::Tensor> out;
  for (int64_t k = 0; k < options_.num_layers; ++k) {
    out.insert(out.end(), {weight_ih[k], weight_hh[k], bias_ih[k], bias_hh[k]});
  }
  return out;
}

bool DpRecurrentBase::HasCapture() const {
  for (const Capture& c : captures_) {
    if (!c.ih_backprop.defined()) return false;
  }
  return true;
}

int64_t DpRecurrentBase::CapturedBatchSize() const { return captures_[0].input.size(1); }

const std::vector<DpRecurrentBase::Piece>& DpRecurrentBase::Pieces() {
  CheckCapture(*this);
  if (!pieces_.empty()) return pieces_;
  for (const Capture& c : captures_) {
    torch::Tensor g_ih = BatchMajor(c.ih_backprop);
    torch::Tensor g_hh = g_ih;  // LSTM: the gates' backprop is both projections'
    if (cell_ == RecurrentCell::kGru) {
      std::vector<torch::Tensor> steps = c.hh_backprops;
      // A step whose recurrent projection received no gradient contributes zero.
      for (torch::Tensor& s : steps) {
        if (!s.defined()) s = torch::zeros_like(c.ih_backprop[0]);
      }
      g_hh = torch::stack(steps, 1);
    }
    pieces_.push_back({BatchMajor(c.input), g_ih});
    pieces_.push_back({BatchMajor(c.hidden), g_hh});
  }
  return pieces_;
}

void DpRecurrentBase::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  const std::vector<Piece>& pieces = Pieces();
  for (size_t k = 0; k < pieces.size(); k += 2) {
    const Piece &ih = pieces[k], &hh = pieces[k + 1];
    out->push_back(PositionSquaredNorms(ih.a, ih.g, method_));
    out->push_back(PositionSquaredNorms(hh.a, hh.g, method_));
    out->push_back(SquaredNorms(ih.g.sum(1)));
    out->push_back(SquaredNorms(hh.g.sum(1)));
  }
}

std::vector<torch::Tensor> DpRecurrentBase::PerExampleGradients() {
  const std::vector<Piece>& pieces = Pieces();
  std::vector<torch::Tensor> out;
  for (size_t k = 0; k < pieces.size(); k += 2) {
    const Piece &ih = pieces[k], &hh = pieces[k + 1];
    out.push_back(torch::bmm(ih.g.transpose(1, 2), ih.a));
    out.push_back(torch::bmm(hh.g.transpose(1, 2), hh.a));
    out.push_back(ih.g.sum(1));
    out.push_back(hh.g.sum(1));
  }
  return out;
}

void DpRecurrentBase::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                   std::vector<torch::Tensor>* out) {
  const std::vector<Piece>& pieces = Pieces();
  const int64_t m = microbatches.size(0);
  // A microbatch is one record whose steps are its examples' steps.
  auto group = [&](const torch::Tensor& x) {
    return GroupRows(x, microbatches).reshape({m, -1, x.size(2)});
  };
  for (size_t k = 0; k < pieces.size(); k += 2) {
    torch::Tensor a_ih = group(pieces[k].a), g_ih = group(pieces[k].g);
    torch::Tensor a_hh = group(pieces[k + 1].a), g_hh = group(pieces[k + 1].g);
    out->push_back(PositionSquaredNorms(a_ih, g_ih, method_));
    out->push_back(PositionSquaredNorms(a_hh, g_hh, method_));
    out->push_back(SquaredNorms(g_ih.sum(1)));
    out->push_back(SquaredNorms(g_hh.sum(1)));
  }
}

void DpRecurrentBase::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                            std::vector<torch::Tensor>* sums) {
  const std::vector<Piece>& pieces = Pieces();
  const size_t count = 2 * pieces.size();
  TORCH_CHECK(scales.size() == count && sums->size() == count, Describe(), ": expected ", count,
              " scale vectors and sums");
  for (size_t k = 0; k < pieces.size(); k += 2) {
    const size_t first = 2 * k;  // weight_ih, weight_hh, bias_ih, bias_hh of this layer
    for (size_t j = 0; j < 2; ++j) {
      const Piece& piece = pieces[k + j];
      const int64_t batch = piece.a.size(0), d = piece.a.size(2), p = piece.g.size(2);
      // sum_i s_i G_i^T A_i as one GEMM over all steps of the batch, scaling the smaller.
      torch::Tensor s = scales[first + j].to(piece.g.scalar_type()).view({batch, 1, 1});
      torch::Tensor& weight_sum = (*sums)[first + j];
      if (d <= p) {
        weight_sum.addmm_(piece.g.reshape({-1, p}).t(), (piece.a * s).reshape({-1, d}));
      } else {
        weight_sum.addmm_((piece.g * s).reshape({-1, p}).t(), piece.a.reshape({-1, d}));
      }
      (*sums)[first + 2 + j].addmv_(piece.g.sum(1).t(),
                                    scales[first + 2 + j].to(piece.g.scalar_type()));
    }
  }
}

void DpRecurrentBase::ClearCapture() {
  for (Capture& c : captures_) c = Capture();
  pieces_.clear();
}

std::string DpRecurrentBase::Describe() const {
  return absl::StrCat(cell_ == RecurrentCell::kLstm ? "DpLSTM(" : "DpGRU(", options_.input_size,
                      ", ", options_.hidden_size, ", num_layers ", options_.num_layers, ")");
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

}  // namespace dpkit::optim
