#pragma once
// The stacked cells of both fused decoders (fused_decoders.cpp) and their per-step products.
#include <ATen/Parallel.h>

#include <vector>

#include "fused_recurrence_detail.h"
#include "luong/models/matrix_products.h"
#include "luong/models/step_buffers.h"
#include "recurrent_cells.h"

namespace luong::models::detail {

using cells::gates_backward;
using cells::gates_forward;
using cells::lstm_backward;
using cells::lstm_forward;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- the teacher-forced decoders ------------------------------------------------------------------

// A row block's per-step products against a step's panels: its own, or, for b in AMX panels, made
// with the other block in a StepTeam (both blocks' rows, half of b's columns each).
struct BlockProducts {
  const MatrixProducts& products;
  StepTeam* team = nullptr;
  int64_t block = 0;  // (in a team, its member number)

  // Whether the block runs step t: while it has rows there, and in a team while the other block has.
  bool runs_step(const PackedRows& packed, int64_t t) const {
    return packed.active(t, block) > 0 || (team != nullptr && packed.active(t, 1 - block) > 0);
  }
  void addmm_out(torch::Tensor& out, const torch::Tensor& init, const torch::Tensor& a, const PanelOperand& b) const {
    if (teamed(b)) return team->product(static_cast<int>(block), out, a, init, b);
    products.addmm_out(out, init, a, b);
  }
  void mm_out(torch::Tensor& out, const torch::Tensor& a, const PanelOperand& b) const {
    if (teamed(b)) return team->product(static_cast<int>(block), out, a, {}, b);
    products.mm_out(out, a, b);
  }
  void add_mm_(torch::Tensor& out, const torch::Tensor& a, const PanelOperand& b) const {
    if (teamed(b)) return team->product(static_cast<int>(block), out, a, out, b);
    products.add_mm_(out, a, b);
  }

 private:
  bool teamed(const PanelOperand& b) const { return team != nullptr && b.amx_panels() != nullptr; }
};

// The stacked cells that both decoders' kernels run, L GRU or LSTM layers: per layer the states
// h_0 .. h_T [T + 1, B, H] (and the cells), the saved gate values [T, B, Z H] (GRU r|z|n|W_hn h + b_hn,
// LSTM i|f|g|o|tanh c'), and the inputs of the layers above [T, B, H]: the outputs of the layer below,
// times the dropout mask between layers (what nn.GRU/nn.LSTM's dropout does) or those outputs
// themselves. The decoder's kernel feeds layer 0 and reads the top layer.
// cell_weights: w_ih, w_hh, b_ih, b_hh per layer, bottom first.
struct DecoderStack {
  int64_t L = 0, T = 0, B = 0, H = 0, G = 0, Z = 0;
  bool lstm = false, masked_between = false;
  MatrixProducts products;
  std::vector<torch::Tensor> w_ih, w_hh, b_ih, b_hh;  // detached (w_ih, w_hh as products' operands), per
                                                      // layer (once: a step is microseconds)
  // The per-step products' right operands: w_ih^T, w_hh^T in the forward pass, w_ih, w_hh backwards.
  std::vector<PanelOperand> step_ih, step_hh;
  std::vector<torch::Tensor> states, cells, saved, inputs;
  torch::Tensor between;                              // [L - 1, T, B, H] or empty
  // Layer 0's input weights split at the embeddings: w_ih[0][:, :E] and w_ih[0][:, E:] (the part the
  // kernel feeds per step). Copied once, in the forward pass, and kept for the backward: as column
  // slices every product with them would run on MKL (oneDNN would copy a strided operand per
  // product), slower than oneDNN on AMD (docs/appendix/benchmark-diary.md, 2026-12-03 evening).
  torch::Tensor w_embed, w_feed;

  DecoderStack(at::TensorList cell_weights, const torch::Tensor& h0, const torch::Tensor& c0,
               const torch::Tensor& between_mask, int64_t steps, bool is_lstm, bool bf16)
      : products{bf16} {
    L = static_cast<int64_t>(cell_weights.size()) / 4;
    TORCH_CHECK(L >= 1 && static_cast<int64_t>(cell_weights.size()) == 4 * L, "fused decoder: 4 tensors per layer");
    TORCH_CHECK(h0.dim() == 3 && h0.size(0) == L, "fused decoder: h0 must be [layers, B, H]");
    T = steps, B = h0.size(1), H = cell_weights[1].size(1), lstm = is_lstm, G = cells::gate_count(lstm), Z = cells::saved_count(lstm);
    masked_between = between_mask.numel() > 0;
    TORCH_CHECK(!masked_between || between_mask.size(0) == L - 1, "fused decoder: between-layer masks must be [L - 1, B, T, H]");
    const torch::TensorOptions opts = h0.options();
    // Zero where a row's steps are past its length: nothing is computed there, and the weight
    // gradients' products over all steps read them.
    for (int64_t l = 0; l < L; ++l) {
      states.push_back(torch::zeros({T + 1, B, H}, opts));
      states[l][0].copy_(h0[l]);
      cells.push_back(lstm ? torch::zeros({T + 1, B, H}, opts) : torch::empty({0}, opts));
      if (lstm) cells[l][0].copy_(c0[l]);
      saved.push_back(torch::empty({T, B, Z * H}, opts));
    }
    between = masked_between ? between_mask.transpose(1, 2).contiguous() : between_mask;
    for (int64_t l = 1; l < L; ++l) {
      inputs.push_back(masked_between ? torch::zeros({T, B, H}, opts) : states[l - 1].narrow(0, 1, T));
    }
    detach_weights(cell_weights, true);
    const int64_t E = w_ih[0].size(1) - H;
    w_embed = w_ih[0].narrow(1, 0, E).contiguous();
    w_feed = w_ih[0].narrow(1, E, H).contiguous();
  }

  // w_ih, w_hh, b_ih, b_hh per layer: the parameters (forward) or the operands save() kept (backward).
  void detach_weights(at::TensorList weights, bool forward) {
    for (int64_t l = 0; l < L; ++l) {
      w_ih.push_back(products.operand(weights[4 * l].detach()));
      w_hh.push_back(products.operand(weights[4 * l + 1].detach()));
      b_ih.push_back(weights[4 * l + 2].detach());
      b_hh.push_back(weights[4 * l + 3].detach());
      // (layer 0's input product is the caller's: the embeddings' and the fed part's weights)
      if (l > 0) step_ih.push_back(products.panel_operand(forward ? w_ih[l].t() : w_ih[l]));
      step_hh.push_back(products.panel_operand(forward ? w_hh[l].t() : w_hh[l]));
    }
  }

  void save(AutogradContext* ctx) const {
    // The products' operands (converted once, in the forward pass) and the biases.
    std::vector<torch::Tensor> operands;
    for (int64_t l = 0; l < L; ++l) operands.insert(operands.end(), {w_ih[l], w_hh[l], b_ih[l], b_hh[l]});
    ctx->saved_data["stack_weights"] = operands;
    ctx->saved_data["w_embed"] = w_embed;
    ctx->saved_data["w_feed"] = w_feed;
    ctx->saved_data["states"] = states;
    ctx->saved_data["cells"] = cells;
    ctx->saved_data["saved"] = saved;
    ctx->saved_data["inputs"] = inputs;
    ctx->saved_data["between"] = between;
    ctx->saved_data["lstm"] = lstm;
    ctx->saved_data["bf16"] = products.bf16;
  }
  explicit DecoderStack(AutogradContext* ctx)
      : products{ctx->saved_data["bf16"].toBool()},
        states(ctx->saved_data["states"].toTensorVector()),
        cells(ctx->saved_data["cells"].toTensorVector()),
        saved(ctx->saved_data["saved"].toTensorVector()),
        inputs(ctx->saved_data["inputs"].toTensorVector()),
        between(ctx->saved_data["between"].toTensor()),
        w_embed(ctx->saved_data["w_embed"].toTensor()),
        w_feed(ctx->saved_data["w_feed"].toTensor()) {
    L = static_cast<int64_t>(states.size()), T = states[0].size(0) - 1, B = states[0].size(1), H = states[0].size(2);
    lstm = ctx->saved_data["lstm"].toBool(), G = cells::gate_count(lstm), Z = cells::saved_count(lstm);
    masked_between = between.numel() > 0;
    detach_weights(ctx->saved_data["stack_weights"].toTensorVector(), false);
  }

  // Step t for rows [first, first + rows): gi holds layer 0's input gates (x W_ih^T + b_ih); runs
  // layer 0's cell, then every layer above. gi, gh [rows, G H] are workspaces.
  template <typename scalar_t>
  void forward_step(const BlockProducts& step, int64_t t, int64_t first, int64_t rows, torch::Tensor& gi,
                    torch::Tensor& gh) const {
    for (int64_t l = 0; l < L; ++l) {
      if (l > 0) {
        torch::Tensor input = step_rows(inputs[l - 1], t, B, first, rows);
        if (masked_between) {
          torch::mul_out(input, step_rows(states[l - 1], t + 1, B, first, rows), step_rows(between[l - 1], t, B, first, rows));
        }
        step.addmm_out(gi, b_ih[l], input, step_ih[l - 1]);
      }
      step.addmm_out(gh, b_hh[l], step_rows(states[l], t, B, first, rows), step_hh[l]);
      scalar_t* h = step_ptr<scalar_t>(states[l], t + 1) + first * H;
      scalar_t* z = step_ptr<scalar_t>(saved[l], t) + first * Z * H;
      if (lstm) {
        lstm_forward(gi.data_ptr<scalar_t>(), gh.data_ptr<scalar_t>(),
                     step_ptr<scalar_t>(cells[l], t) + first * H, h, step_ptr<scalar_t>(cells[l], t + 1) + first * H, z,
                     rows, H);
      } else {
        gates_forward(gi.data_ptr<scalar_t>(), gh.data_ptr<scalar_t>(), step_ptr<scalar_t>(states[l], t) + first * H, h,
                      z, rows, H);
      }
    }
  }

  // The gradients of one row block through time: dh[l], dc[l] [rows, H] carry each layer's
  // gradient from step t + 1 back to step t, and end as the gradients of h0 and c0.
  struct Carried {
    std::vector<torch::Tensor> dh, dc;
    torch::Tensor dc_step;
  };
  Carried carried(torch::Tensor& dh0, torch::Tensor& dc0, int64_t first, int64_t rows) const {
    Carried c;
    for (int64_t l = 0; l < L; ++l) {
      c.dh.push_back(dh0[l].narrow(0, first, rows).zero_());
      c.dc.push_back(lstm ? dc0[l].narrow(0, first, rows).zero_() : torch::Tensor());
    }
    if (lstm) c.dc_step = torch::empty({rows, H}, dh0.options());
    return c;
  }
  // The block's first `rows` rows of a Carried (views: what a step writes stays in it).
  static Carried first_rows(const Carried& c, int64_t rows) {
    Carried view;
    for (std::size_t l = 0; l < c.dh.size(); ++l) {
      view.dh.push_back(c.dh[l].narrow(0, 0, rows));
      view.dc.push_back(c.dc[l].defined() ? c.dc[l].narrow(0, 0, rows) : torch::Tensor());
    }
    if (c.dc_step.defined()) view.dc_step = c.dc_step.narrow(0, 0, rows);
    return view;
  }

  // Step t backwards for the block's active rows [first, first + rows), which are the real tokens
  // [token, token + rows): dh_step [rows, H] holds the gradient of the top layer's h_t from outside
  // the recurrence (it is used as a workspace). Runs the layers top-down into dgi, dgh (packed, [N,
  // G H]) and the carried gradients; layer 0's input gradient is dgi[0] at those tokens, for the
  // caller.
  template <typename scalar_t>
  void backward_step(const BlockProducts& step, int64_t t, int64_t first, int64_t rows, int64_t token,
                     torch::Tensor& dh_step, Carried& c,
                     const std::vector<torch::Tensor>& dgi, const std::vector<torch::Tensor>& dgh) const {
    for (int64_t l = L - 1; l >= 0; --l) {
      scalar_t* step_grad = dh_step.data_ptr<scalar_t>();
      const scalar_t* from_next = c.dh[l].data_ptr<scalar_t>();
      for (int64_t i = 0; i < rows * H; ++i) step_grad[i] += from_next[i];
      const scalar_t* z = step_ptr<scalar_t>(saved[l], t) + first * Z * H;
      if (lstm) {
        lstm_backward(step_grad, c.dc[l].data_ptr<scalar_t>(), z, step_ptr<scalar_t>(cells[l], t) + first * H,
                      dgi[l].data_ptr<scalar_t>() + token * G * H, c.dh[l].data_ptr<scalar_t>(),
                      c.dc_step.data_ptr<scalar_t>(), rows, H);
        c.dc[l].copy_(c.dc_step);
      } else {
        gates_backward(step_grad, z, step_ptr<scalar_t>(states[l], t) + first * H,
                       dgi[l].data_ptr<scalar_t>() + token * G * H, dgh[l].data_ptr<scalar_t>() + token * G * H,
                       c.dh[l].data_ptr<scalar_t>(), rows, H);
      }
      step.add_mm_(c.dh[l], dgh[l].narrow(0, token, rows), step_hh[l]);
      if (l > 0) {
        step.mm_out(dh_step, dgi[l].narrow(0, token, rows), step_ih[l - 1]);
        if (masked_between) dh_step.mul_(step_rows(between[l - 1], t, B, first, rows));
      }
    }
  }

  // Each layer's gate gradients at the real tokens, packed ([N, G H]: the backward steps write
  // every real token's rows, and the padding has none), for the weight gradients' products and the
  // bias gradients' sums as they are (an LSTM's dgh is its dgi).
  struct RealGateGradients {
    std::vector<torch::Tensor> dgi, dgh;
  };
  RealGateGradients gate_gradients(const PackedRows& packed) const {
    const int64_t N = packed.tokens().size(0);
    RealGateGradients real;
    for (int64_t l = 0; l < L; ++l) {
      real.dgi.push_back(torch::empty({N, G * H}, states[0].options()));
      real.dgh.push_back(lstm ? real.dgi[l] : torch::empty({N, G * H}, states[0].options()));
    }
    return real;
  }

  // The factors of the weight gradients' products over the real tokens, appended to `factors`: per
  // layer w_ih's, but layer 0's (its input is the caller's), and w_hh's.
  void add_weight_gradient_factors(std::vector<Factors>& factors, const RealGateGradients& real,
                                   const PackedRows& packed) const {
    for (int64_t l = 0; l < L; ++l) {
      if (l > 0) factors.emplace_back(real.dgi[l].t(), packed.real(inputs[l - 1]));
      factors.emplace_back(real.dgh[l].t(), packed.real(states[l].narrow(0, 0, T)));
    }
  }

  // Layer 0's w_ih gradient [G H, E + H], which two products fill: its embeddings' columns as
  // outs[first], the fed-back (or context) ones as outs[first + 1], each in place (mm_each's outs).
  torch::Tensor layer0_input_weight_gradient(std::vector<torch::Tensor>& outs, std::size_t first) const {
    const int64_t E = w_embed.size(1), width = w_ih[0].size(1);
    torch::Tensor gradient = torch::empty({G * H, width}, states[0].options());
    outs[first] = gradient.narrow(1, 0, E);
    outs[first + 1] = gradient.narrow(1, E, width - E);
    return gradient;
  }

  // Appends w_ih, w_hh, b_ih, b_hh's gradients per layer to `out`: layer 0's w_ih gradient is the
  // caller's, the other products those of add_weight_gradient_factors' factors, from `product` on.
  void append_weight_gradients(variable_list& out, const RealGateGradients& real, const torch::Tensor& dw_ih0,
                               std::vector<torch::Tensor>::const_iterator product) const {
    for (std::size_t l = 0; l < real.dgi.size(); ++l) {
      out.push_back(l == 0 ? dw_ih0 : *product++);
      out.push_back(*product++);
      out.push_back(real.dgi[l].sum(0));
      out.push_back(real.dgh[l].sum(0));
    }
  }
};

}  // namespace luong::models::detail
