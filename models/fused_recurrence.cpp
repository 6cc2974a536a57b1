#include "luong/models/fused_recurrence.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <string>

#include "fused_recurrence_detail.h"
#include "luong/models/matrix_products.h"
#include "luong/models/step_buffers.h"
#include "luong/util/path_counts.h"
#include "recurrent_cells.h"

namespace luong::models {

CellWeights CellWeights::of(torch::nn::GRU& gru) {
  const std::vector<torch::Tensor>& w = gru->all_weights();  // layer 0, forward: w_ih, w_hh, b_ih, b_hh
  return {w[0], w[1], w[2], w[3]};
}

CellWeights CellWeights::of(const RecurrentLayers& layers, int64_t layer, int64_t direction) {
  const std::vector<torch::Tensor> w = layers.all_weights();  // per layer, per direction: w_ih, w_hh, b_ih, b_hh
  const int64_t directions = static_cast<int64_t>(w.size()) / (4 * layers.layers());
  const auto i = static_cast<std::size_t>(4 * (layer * directions + direction));
  return {w[i], w[i + 1], w[i + 2], w[i + 3]};
}


namespace detail {

void check_inputs(const torch::Tensor& lengths, int64_t batch, int64_t steps) {
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == batch, "fused recurrence: lengths must be [B]");
  const auto* l = lengths.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(l[b] >= 0 && l[b] <= steps, "fused recurrence: length ", l[b], " outside [0, ", steps, "]");
  }
}

torch::Tensor to_lengths(const torch::Tensor& lengths) { return lengths.to(torch::kCPU, torch::kLong).contiguous(); }

torch::Tensor empty_lengths() { return torch::empty({0}, torch::kLong); }

std::vector<torch::Tensor> flat_weights(const std::vector<CellWeights>& layers) {
  std::vector<torch::Tensor> flat;
  for (const CellWeights& w : layers) flat.insert(flat.end(), {w.w_ih, w.w_hh, w.b_ih, w.b_hh});
  return flat;
}

}  // namespace detail

namespace {

using cells::gates_backward;
using cells::gates_forward;
using cells::lstm_backward;
using cells::lstm_forward;
using detail::check_inputs;
using detail::to_lengths;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- one recurrent layer over a padded batch: one direction, or both at once -------------------
// Time t is processed at slot k (t = k forwards, t = S - 1 - k backwards); states, cells and saved
// gate values are indexed by slot, inputs, gates and outputs by time. A row is active at time t when
// t < its length: a backward row so starts at its own last token, from a zero state, as a packed
// bidirectional nn.GRU/nn.LSTM does. The two directions of a bidirectional layer are independent
// recurrences over the same rows: one node runs them side by side, each thread one direction's block
// of rows, so that at two threads each step's product takes the whole batch (a product of more
// rows runs at a higher rate), each thread streams one direction's weights, and both directions
// share one parallel region.

struct SequenceShape {
  int64_t B, S, I, H;
  bool reverse;
  int64_t time(int64_t k) const { return reverse ? S - 1 - k : k; }
};

// One direction's buffers, as its forward pass fills them and its backward pass reads them.
struct DirectionBuffers {
  SequenceShape shape;
  torch::Tensor w_ih, w_hh;  // the products' operands (bf16 under bf16 precision)
  torch::Tensor states;      // [S + 1, B, H] by slot: h before slot k is [k]
  torch::Tensor cells;       // likewise for LSTM, else undefined
  torch::Tensor saved;       // [S, B, Z H] by slot: the gate values the backward pass needs
};

// Whether direction d of D runs backwards: a bidirectional layer's second, or a single one when asked.
bool runs_backwards(int64_t d, int64_t D, bool reverse) { return D == 2 ? d == 1 : reverse; }

// Saved-data keys of direction d.
std::string direction_key(const char* name, int64_t d) { return name + std::to_string(d); }

// What a lane block's time loop reads of its layer: the rows, direction d of D and its buffers.
struct LayerPass {
  const PackedRows& packed;
  const DirectionBuffers& dir;
  const MatrixProducts& products;
  bool lstm;
  int64_t d, D;
};

// A block of rows one thread runs through the sequence: rows [first, first + rows) of block `block`.
struct LaneBlock {
  int64_t block, first, rows;
};

// Forward through the sequence for one lane block: each step's recurrent product on the block's
// active rows, then the gates; rows past their sequences keep their state (zero, backwards, until
// their last token). Returns the rows computed.
template <typename scalar_t>
int64_t forward_block(const LayerPass& pass, const LaneBlock& lane, const torch::Tensor& gi, const torch::Tensor& bias_hh,
                      const PanelOperand& w_hh_t, torch::Tensor& outputs) {
  const DirectionBuffers& dir = pass.dir;
  const int64_t B = dir.shape.B, S = dir.shape.S, H = dir.shape.H, D = pass.D;
  const int64_t G = cells::gate_count(pass.lstm), Z = cells::saved_count(pass.lstm);
  const int64_t first = lane.first, rows = lane.rows;
  const torch::Tensor &states = dir.states, &cells = dir.cells;
  torch::Tensor gh = torch::empty({rows, G * H}, states.options());
  int64_t computed = 0;
  for (int64_t k = 0; k < S; ++k) {
    const int64_t t = dir.shape.time(k), n = pass.packed.active(t, lane.block);
    computed += n;
    scalar_t* h = step_ptr<scalar_t>(states, k + 1) + first * H;
    const scalar_t* h_prev = step_ptr<scalar_t>(states, k) + first * H;
    std::memcpy(h + n * H, h_prev + n * H, sizeof(scalar_t) * (rows - n) * H);
    if (pass.lstm) {
      std::memcpy(step_ptr<scalar_t>(cells, k + 1) + (first + n) * H, step_ptr<scalar_t>(cells, k) + (first + n) * H,
                  sizeof(scalar_t) * (rows - n) * H);
    }
    if (n == 0) continue;
    torch::Tensor gh_active = gh.narrow(0, 0, n);
    pass.products.addmm_out(gh_active, bias_hh, step_rows(states, k, B, first, n), w_hh_t);
    const scalar_t* g_in = gi.data_ptr<scalar_t>() + pass.packed.offset(t, lane.block) * G * H;
    scalar_t* z = step_ptr<scalar_t>(dir.saved, k) + first * Z * H;
    if (pass.lstm) {
      lstm_forward(g_in, gh.data_ptr<scalar_t>(), step_ptr<scalar_t>(cells, k) + first * H, h,
                   step_ptr<scalar_t>(cells, k + 1) + first * H, z, n, H);
    } else {
      gates_forward(g_in, gh.data_ptr<scalar_t>(), h_prev, h, z, n, H);
    }
    scalar_t* out = step_ptr<scalar_t>(outputs, t) + first * D * H + pass.d * H;
    for (int64_t r = 0; r < n; ++r) std::memcpy(out + r * D * H, h + r * H, sizeof(scalar_t) * H);
  }
  return computed;
}

// Backward through the sequence for one lane block, from the final states' gradients dh and dc (the
// block's rows, consumed): each token's gate gradients into dgi and dgh (packed; LSTM: one tensor),
// the state's gradient through w_hh. Returns the rows computed.
template <typename scalar_t>
int64_t backward_block(const LayerPass& pass, const LaneBlock& lane, const torch::Tensor& d_outputs,
                       const PanelOperand& w_hh, torch::Tensor dh, torch::Tensor dc, const torch::Tensor& dgi,
                       const torch::Tensor& dgh) {
  const DirectionBuffers& dir = pass.dir;
  const int64_t S = dir.shape.S, H = dir.shape.H, D = pass.D;
  const int64_t G = cells::gate_count(pass.lstm), Z = cells::saved_count(pass.lstm);
  const int64_t first = lane.first, rows = lane.rows;
  torch::Tensor dh_step = torch::empty({rows, H}, dh.options());
  torch::Tensor dc_step = torch::empty({rows, H}, dh.options());
  int64_t computed = 0;
  for (int64_t k = S - 1; k >= 0; --k) {
    const int64_t t = dir.shape.time(k), n = pass.packed.active(t, lane.block);
    if (n == 0) continue;  // every row's state passes through unchanged
    computed += n;
    // The output at time t is the state after slot k where active, a constant zero elsewhere.
    scalar_t* g = dh.data_ptr<scalar_t>();
    const scalar_t* go = step_ptr<scalar_t>(d_outputs, t) + first * D * H + pass.d * H;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < H; ++i) g[r * H + i] += go[r * D * H + i];
    }
    std::memcpy(dh_step.data_ptr<scalar_t>() + n * H, g + n * H, sizeof(scalar_t) * (rows - n) * H);
    const scalar_t* z = step_ptr<scalar_t>(dir.saved, k) + first * Z * H;
    const int64_t token = pass.packed.offset(t, lane.block);
    scalar_t* dgates = dgi.data_ptr<scalar_t>() + token * G * H;
    const torch::Tensor dgates_h = dgh.narrow(0, token, n);
    torch::Tensor dh_active = dh_step.narrow(0, 0, n);
    if (pass.lstm) {
      std::memcpy(dc_step.data_ptr<scalar_t>() + n * H, dc.data_ptr<scalar_t>() + n * H, sizeof(scalar_t) * (rows - n) * H);
      lstm_backward(g, dc.data_ptr<scalar_t>(), z, step_ptr<scalar_t>(dir.cells, k) + first * H, dgates,
                    dh_step.data_ptr<scalar_t>(), dc_step.data_ptr<scalar_t>(), n, H);
      std::swap(dc, dc_step);
    } else {
      gates_backward(g, z, step_ptr<scalar_t>(dir.states, k) + first * H, dgates, dgates_h.data_ptr<scalar_t>(),
                     dh_step.data_ptr<scalar_t>(), n, H);
    }
    pass.products.add_mm_(dh_active, dgates_h, w_hh);
    std::swap(dh, dh_step);
  }
  return computed;
}

struct RecurrentLayerFunction : torch::autograd::Function<RecurrentLayerFunction> {
  // x [B, S, I], lengths [B], weights w_ih, w_hh, b_ih, b_hh of D = 1 or 2 directions (the second
  // runs backwards; a single one backwards when `reverse`) -> outputs [B, S, D H] (the directions
  // side by side), final h [D, B, H] (and c alike for LSTM, else empty).
  // Inside, the rows are in PackedRows's order and only real tokens are computed: the input
  // projection over them at once ([N, G H], packed), each step's products on each block's active rows.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& lengths_in,
                               at::TensorList weights, bool lstm, bool reverse, bool bf16) {
    RECORD_FUNCTION("luong::RecurrentLayerFunction::forward", std::vector<c10::IValue>());
    const int64_t Z = cells::saved_count(lstm);
    const int64_t D = static_cast<int64_t>(weights.size()) / 4;
    const MatrixProducts products{bf16};
    const int64_t B = x_in.size(0), S = x_in.size(1), H = weights[1].size(1);
    const torch::Tensor lengths = to_lengths(lengths_in);
    check_inputs(lengths, B, S);
    const PackedRows packed(lengths, S, row_block_count(B, D));
    const torch::Tensor x = packed.to_kernel(x_in).transpose(0, 1);  // [S, B, I]
    // The real tokens' inputs [N, I]: the input projection's a (float32: the panels round it), and,
    // as the products take a b, the weight gradients' in the backward pass; the weights as the
    // products take them. Each converted once here.
    const torch::Tensor x_real = packed.real(x);
    const torch::Tensor x_operand = products.operand(x_real);
    std::vector<DirectionBuffers> directions;
    std::vector<torch::Tensor> gi, bias_hh;
    std::vector<PanelOperand> w_hh_t;
    for (int64_t d = 0; d < D; ++d) {
      const torch::Tensor* w = &weights[static_cast<std::size_t>(4 * d)];  // w_ih, w_hh, b_ih, b_hh
      DirectionBuffers dir{{B, S, x_in.size(2), H, runs_backwards(d, D, reverse)},
                           products.operand(w[0].detach()),
                           products.operand(w[1].detach()),
                           torch::zeros({S + 1, B, H}, x.options()),
                           lstm ? torch::zeros({S + 1, B, H}, x.options()) : torch::Tensor(),
                           torch::empty({S, B, Z * H}, x.options())};
      gi.push_back(products.addmm(w[2], x_real, dir.w_ih.t()));  // [N, G H]
      w_hh_t.push_back(products.panel_operand(dir.w_hh.t()));
      bias_hh.push_back(w[3].detach());
      directions.push_back(std::move(dir));
    }
    torch::Tensor outputs = torch::zeros({S, B, D * H}, x.options());  // by time
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_recurrent_layer", [&] {
      packed.for_lane_blocks(D, [&](int64_t d, int64_t block, int64_t first, int64_t rows) {
        const auto di = static_cast<std::size_t>(d);
        path_counts::add(path_counts::Path::kFusedRecurrentRows, forward_block<scalar_t>({packed, directions[di], products, lstm, d, D},
                                                 {block, first, rows}, gi[di], bias_hh[di], w_hh_t[di], outputs));
      });
    });
    ctx->saved_data["x"] = x_operand;
    ctx->saved_data["lengths"] = lengths;
    ctx->saved_data["blocks"] = packed.blocks();
    ctx->saved_data["directions"] = D;
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["lstm"] = lstm;
    ctx->saved_data["bf16"] = bf16;
    std::vector<torch::Tensor> last_states, last_cells;
    for (int64_t d = 0; d < D; ++d) {
      const DirectionBuffers& dir = directions[static_cast<std::size_t>(d)];
      ctx->saved_data[direction_key("states", d)] = dir.states;
      ctx->saved_data[direction_key("cells", d)] = dir.cells;
      ctx->saved_data[direction_key("saved", d)] = dir.saved;
      ctx->saved_data[direction_key("w_ih", d)] = dir.w_ih;
      ctx->saved_data[direction_key("w_hh", d)] = dir.w_hh;
      last_states.push_back(dir.states[S]);
      if (lstm) last_cells.push_back(dir.cells[S]);
    }
    // (autograd outputs must be defined: a GRU's cell output is an empty tensor)
    return {packed.to_caller(outputs.transpose(0, 1)), packed.to_caller(torch::stack(last_states), 1),
            lstm ? packed.to_caller(torch::stack(last_cells), 1) : torch::empty({0}, x.options())};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor x = ctx->saved_data["x"].toTensor();  // the real tokens' inputs, as the products take them
    const bool lstm = ctx->saved_data["lstm"].toBool(), reverse = ctx->saved_data["reverse"].toBool();
    const int64_t D = ctx->saved_data["directions"].toInt();
    std::vector<DirectionBuffers> directions;
    for (int64_t d = 0; d < D; ++d) {
      const torch::Tensor states = ctx->saved_data[direction_key("states", d)].toTensor();
      const torch::Tensor w_ih = ctx->saved_data[direction_key("w_ih", d)].toTensor();
      const torch::Tensor w_hh = ctx->saved_data[direction_key("w_hh", d)].toTensor();
      const SequenceShape direction_shape{states.size(1), states.size(0) - 1, w_ih.size(1), w_hh.size(1),
                                          runs_backwards(d, D, reverse)};
      directions.push_back({direction_shape, w_ih, w_hh, states, ctx->saved_data[direction_key("cells", d)].toTensor(),
                            ctx->saved_data[direction_key("saved", d)].toTensor()});
    }
    const SequenceShape& shape = directions[0].shape;
    const int64_t S = shape.S, B = shape.B, H = shape.H, G = cells::gate_count(lstm);
    const PackedRows packed(ctx->saved_data["lengths"].toTensor(), S, ctx->saved_data["blocks"].toInt());
    const int64_t N = packed.tokens().size(0);
    const torch::TensorOptions opts = directions[0].states.options();  // the model's dtype (x may be a bf16 operand)
    const torch::Tensor d_outputs = grads[0].defined() ? packed.to_kernel(grads[0]).transpose(0, 1).contiguous()
                                                       : torch::zeros({S, B, D * H}, opts);
    // The final states' gradients, [D, B, H] in the kernel's row order.
    const auto final_gradient = [&](const torch::Tensor& g) {
      return g.defined() ? packed.to_kernel(g, 1) : torch::zeros({D, B, H}, opts);
    };
    const torch::Tensor d_last = final_gradient(grads[1]);
    const torch::Tensor d_cell = final_gradient(lstm ? grads[2] : torch::Tensor());
    std::vector<torch::Tensor> dgi, dgh;  // per direction, packed (LSTM: dgh is dgi)
    for (int64_t d = 0; d < D; ++d) {
      dgi.push_back(torch::empty({N, G * H}, opts));
      dgh.push_back(lstm ? dgi.back() : torch::empty({N, G * H}, opts));
    }
    const MatrixProducts products{ctx->saved_data["bf16"].toBool()};
    std::vector<PanelOperand> w_hh;
    for (const DirectionBuffers& dir : directions) w_hh.push_back(products.panel_operand(dir.w_hh));
    AT_DISPATCH_FLOATING_TYPES(opts.dtype().toScalarType(), "fused_recurrent_layer_backward", [&] {
      packed.for_lane_blocks(D, [&](int64_t d, int64_t block, int64_t first, int64_t rows) {
        const auto di = static_cast<std::size_t>(d);
        const LaneBlock lane{block, first, rows};
        torch::Tensor dh = d_last[d].narrow(0, first, rows).clone();  // gradient of the state after slot k
        torch::Tensor dc = d_cell[d].narrow(0, first, rows).clone();
        path_counts::add(path_counts::Path::kFusedRecurrentRows, backward_block<scalar_t>({packed, directions[di], products, lstm, d, D}, lane, d_outputs,
                                                  w_hh[di], dh, dc, dgi[di], dgh[di]));
      });
    });
    // The inputs' gradient is zero at padding (both directions' input products summed); the recurrent
    // weights pair each token's gate gradients with the state before its slot.
    // Per direction: its share of the inputs' gradient, then w_ih's and w_hh's gradients.
    std::vector<Factors> factors;
    for (std::size_t d = 0; d < directions.size(); ++d) {
      const DirectionBuffers& dir = directions[d];
      const torch::Tensor slot_tokens =
          dir.shape.reverse ? (S - 1 - packed.tokens().div(B, "floor")) * B + packed.tokens().remainder(B)
                            : packed.tokens();
      const torch::Tensor previous_states = dir.states.view({(S + 1) * B, H}).index_select(0, slot_tokens);
      factors.insert(factors.end(), {{dgi[d], dir.w_ih}, {dgi[d].t(), x}, {dgh[d].t(), previous_states}});
    }
    const std::vector<torch::Tensor> product = products.mm_each(factors);
    torch::Tensor dx_real = product[0];
    if (D == 2) dx_real.add_(product[3]);
    variable_list result = {packed.to_caller(packed.unpacked(dx_real).transpose(0, 1)), torch::Tensor()};
    for (std::size_t d = 0; d < directions.size(); ++d) {
      result.push_back(product[3 * d + 1]);
      result.push_back(product[3 * d + 2]);
      result.push_back(dgi[d].sum(0));
      result.push_back(dgh[d].sum(0));
    }
    for (int i = 0; i < 3; ++i) result.emplace_back();  // lstm, reverse, bf16
    return result;
  }
};

// One or two directions of a layer through RecurrentLayerFunction: outputs [B, S, D H], hidden (and
// cell) [D, B, H].
FusedLayerOutput recurrent_layer(const torch::Tensor& x, const torch::Tensor& lengths,
                                 const std::vector<CellWeights>& directions, bool lstm, bool reverse) {
  TORCH_CHECK(x.device().is_cpu(), "the fused recurrent layer runs on the CPU");
  const FusedKernelCall call(directions.at(0).w_ih);
  const std::vector<torch::Tensor> flat = detail::flat_weights(directions);
  variable_list out =
      RecurrentLayerFunction::apply(call.input(x), lengths, at::TensorList(flat), lstm, reverse, call.bf16);
  return {out[0], out[1], lstm ? out[2] : torch::Tensor()};
}

}  // namespace


std::pair<torch::Tensor, torch::Tensor> fused_gru_sequence(const torch::Tensor& x, const torch::Tensor& lengths,
                                                           const GruWeights& gru) {
  const FusedLayerOutput out = fused_recurrent_layer(x, lengths, gru, false, false);
  return {out.outputs, out.hidden};
}

FusedLayerOutput fused_recurrent_layer(const torch::Tensor& x, const torch::Tensor& lengths, const GruWeights& weights,
                                       bool lstm, bool reverse) {
  const FusedLayerOutput out = recurrent_layer(x, lengths, {weights}, lstm, reverse);
  return {out.outputs, out.hidden[0], lstm ? out.cell[0] : torch::Tensor()};
}

FusedLayerOutput fused_bidirectional_layer(const torch::Tensor& x, const torch::Tensor& lengths,
                                           const CellWeights& forwards, const CellWeights& backwards, bool lstm) {
  return recurrent_layer(x, lengths, {forwards, backwards}, lstm, false);
}

}  // namespace luong::models
