#include "luong/models/fused_recurrence.h"

#include "luong/util/target_clones.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "luong/models/fused_attention.h"
#include "luong/models/matrix_products.h"
#include "luong/models/step_buffers.h"
#include "luong/util/vector_math.h"

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

namespace {

std::atomic<int64_t> rows_computed{0};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- GRU cell: the gate arithmetic of one step, forward and backward side by side --------------
// gi, gh [B, 3H]: x W_ih^T + b_ih and h W_hh^T + b_hh, gate columns r | z | n.
// saved [B, 4H]: r | z | n | (h W_hn^T + b_hn), what the backward needs besides h_prev.
// Every row is computed: the callers pass the rows inside their sequences only (PackedRows).

template <typename T>
[[gnu::always_inline]] inline void gru_cell_forward(const T* gi, const T* gh, const T* h_prev, T* h_next, T* saved, int64_t B, int64_t H) {
  for (int64_t b = 0; b < B; ++b) {
    const T* hp = h_prev + b * H;
    T* hn = h_next + b * H;
    const T* i_row = gi + b * 3 * H;
    const T* h_row = gh + b * 3 * H;
    T* s = saved + b * 4 * H;
#pragma GCC ivdep  // the rows never overlap; without this GCC gives up on the alias checks
    for (int64_t i = 0; i < H; ++i) {
      const T r = vector_sigmoid(i_row[i] + h_row[i]);
      const T z = vector_sigmoid(i_row[H + i] + h_row[H + i]);
      const T n = vector_tanh(i_row[2 * H + i] + r * h_row[2 * H + i]);
      hn[i] = n + z * (hp[i] - n);  // (1 - z) n + z h, in PyTorch's order
      s[i] = r;
      s[H + i] = z;
      s[2 * H + i] = n;
      s[3 * H + i] = h_row[2 * H + i];
    }
  }
}

// dh [B, H]: gradient of h_next -> dgi, dgh [B, 3H] (overwritten) and dh_prev [B, H] (overwritten
// with the direct path z * dh; the caller adds dgh W_hh).
template <typename T>
[[gnu::always_inline]] inline void gru_cell_backward(const T* dh, const T* saved, const T* h_prev, T* dgi, T* dgh, T* dh_prev, int64_t B, int64_t H) {
  for (int64_t b = 0; b < B; ++b) {
    const T* g = dh + b * H;
    T* di = dgi + b * 3 * H;
    T* dhh = dgh + b * 3 * H;
    T* dp = dh_prev + b * H;
    const T* s = saved + b * 4 * H;
    const T* hp = h_prev + b * H;
#pragma GCC ivdep
    for (int64_t i = 0; i < H; ++i) {
      const T r = s[i], z = s[H + i], n = s[2 * H + i], hn = s[3 * H + i];
      const T dn = g[i] * (T(1) - z) * (T(1) - n * n);
      const T dz = g[i] * (hp[i] - n) * z * (T(1) - z);
      const T dr = dn * hn * r * (T(1) - r);
      dp[i] = g[i] * z;
      di[i] = dr;
      di[H + i] = dz;
      di[2 * H + i] = dn;
      dhh[i] = dr;
      dhh[H + i] = dz;
      dhh[2 * H + i] = dn * r;
    }
  }
}

// The gate loops compiled for AVX-512, AVX2 + FMA and baseline x86-64, chosen at load time; the
// transcendental functions are vector_math.h's, so each loop vectorises (with -fno-trapping-math,
// set for this file in CMakeLists.txt).
#define LUONG_GATE_CLONES LUONG_X86_CLONES
#define LUONG_GATE_KERNELS(T)                                                                                  \
  LUONG_GATE_CLONES void gates_forward(const T* gi, const T* gh, const T* h_prev, T* h_next, T* saved,         \
                                       int64_t B, int64_t H) {                              \
    gru_cell_forward(gi, gh, h_prev, h_next, saved, B, H);                                             \
  }                                                                                                            \
  LUONG_GATE_CLONES void gates_backward(const T* dh, const T* saved, const T* h_prev, T* dgi, T* dgh,          \
                                        T* dh_prev, int64_t B, int64_t H) {                 \
    gru_cell_backward(dh, saved, h_prev, dgi, dgh, dh_prev, B, H);                                     \
  }
LUONG_GATE_KERNELS(float)
LUONG_GATE_KERNELS(double)

template <typename T>
void tanh_backward(const T* grad, const T* y, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * (T(1) - y[i] * y[i]);
}

void check_inputs(const torch::Tensor& lengths, int64_t batch, int64_t steps) {
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == batch, "fused recurrence: lengths must be [B]");
  const auto* l = lengths.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(l[b] >= 0 && l[b] <= steps, "fused recurrence: length ", l[b], " outside [0, ", steps, "]");
  }
}

torch::Tensor to_lengths(const torch::Tensor& lengths) { return lengths.to(torch::kCPU, torch::kLong).contiguous(); }

// ---- LSTM cell: gates i | f | g | o (PyTorch's order) ---------------------------------------------
// gi, gh [B, 4H]: x W_ih^T + b_ih and h W_hh^T + b_hh. saved [B, 5H]: i | f | g | o | tanh(c').
// Every row is computed, as for the GRU.

template <typename T>
[[gnu::always_inline]] inline void lstm_cell_forward(const T* gi, const T* gh, const T* c_prev, T* h_next,
                                                     T* c_next, T* saved, int64_t B, int64_t H) {
  for (int64_t b = 0; b < B; ++b) {
    const T* x = gi + b * 4 * H;
    const T* y = gh + b * 4 * H;
    const T* c = c_prev + b * H;
    T* hn = h_next + b * H;
    T* cn = c_next + b * H;
    T* s = saved + b * 5 * H;
#pragma GCC ivdep
    for (int64_t i = 0; i < H; ++i) {
      const T in = vector_sigmoid(x[i] + y[i]);
      const T forget = vector_sigmoid(x[H + i] + y[H + i]);
      const T cell = vector_tanh(x[2 * H + i] + y[2 * H + i]);
      const T out = vector_sigmoid(x[3 * H + i] + y[3 * H + i]);
      const T c_new = forget * c[i] + in * cell;
      const T tc = vector_tanh(c_new);
      cn[i] = c_new;
      hn[i] = out * tc;
      s[i] = in;
      s[H + i] = forget;
      s[2 * H + i] = cell;
      s[3 * H + i] = out;
      s[4 * H + i] = tc;
    }
  }
}

// dh, dc [B, H]: gradients of h' and c' -> dgates [B, 4H] (overwritten; the same for gi and gh),
// dc_prev [B, H] (overwritten). The caller adds dgates W_hh to the previous step's dh.
template <typename T>
[[gnu::always_inline]] inline void lstm_cell_backward(const T* dh, const T* dc, const T* saved, const T* c_prev, T* dgates,
                                                      T* dh_prev, T* dc_prev, int64_t B, int64_t H) {
  for (int64_t b = 0; b < B; ++b) {
    const T* g = dh + b * H;
    const T* gc = dc + b * H;
    T* d = dgates + b * 4 * H;
    T* dp = dh_prev + b * H;
    T* dcp = dc_prev + b * H;
    const T* s = saved + b * 5 * H;
    const T* c = c_prev + b * H;
#pragma GCC ivdep
    for (int64_t i = 0; i < H; ++i) {
      const T in = s[i], forget = s[H + i], cell = s[2 * H + i], out = s[3 * H + i], tc = s[4 * H + i];
      const T dc_total = gc[i] + g[i] * out * (T(1) - tc * tc);
      d[i] = dc_total * cell * in * (T(1) - in);
      d[H + i] = dc_total * c[i] * forget * (T(1) - forget);
      d[2 * H + i] = dc_total * in * (T(1) - cell * cell);
      d[3 * H + i] = g[i] * tc * out * (T(1) - out);
      dcp[i] = dc_total * forget;
      dp[i] = 0;
    }
  }
}

#define LUONG_LSTM_KERNELS(T)                                                                                    \
  LUONG_GATE_CLONES void lstm_forward(const T* gi, const T* gh, const T* c_prev, T* h_next,                         \
                                      T* c_next, T* saved, int64_t B, int64_t H) {             \
    lstm_cell_forward(gi, gh, c_prev, h_next, c_next, saved, B, H);                              \
  }                                                                                                              \
  LUONG_GATE_CLONES void lstm_backward(const T* dh, const T* dc, const T* saved, const T* c_prev, T* dgates,        \
                                       T* dh_prev, T* dc_prev, int64_t B, int64_t H) {          \
    lstm_cell_backward(dh, dc, saved, c_prev, dgates, dh_prev, dc_prev, B, H);                           \
  }
LUONG_LSTM_KERNELS(float)
LUONG_LSTM_KERNELS(double)

// ---- one recurrent layer over a padded batch: one direction, or both at once -------------------
// Time t is processed at slot k (t = k forwards, t = S - 1 - k backwards); states, cells and saved
// gate values are indexed by slot, inputs, gates and outputs by time. A row is active at time t when
// t < its length: a backward row so starts at its own last token, from a zero state, as a packed
// bidirectional nn.GRU/nn.LSTM does. The two directions of a bidirectional layer are independent
// recurrences over the same rows: one node runs them side by side, each thread one direction's block
// of rows, so that at two threads each step's product takes the whole batch (on one core oneDNN
// multiplies 32 rows at 1.25-1.4x its rate for 16), each thread streams one direction's weights, and
// both directions share one parallel region.

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

struct RecurrentLayerFunction : torch::autograd::Function<RecurrentLayerFunction> {
  // x [B, S, I], lengths [B], weights w_ih, w_hh, b_ih, b_hh of D = 1 or 2 directions (the second
  // runs backwards; a single one backwards when `reverse`) -> outputs [B, S, D H] (the directions
  // side by side), final h [D, B, H] (and c alike for LSTM, else empty).
  // Inside, the rows are in PackedRows's order and only real tokens are computed: the input
  // projection over them at once ([N, G H], packed), each step's products on each block's active rows.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& lengths_in,
                               at::TensorList weights, bool lstm, bool reverse, bool bf16) {
    RECORD_FUNCTION("luong::RecurrentLayerFunction::forward", std::vector<c10::IValue>());
    const int64_t G = lstm ? 4 : 3, Z = lstm ? 5 : 4;  // gates, saved values per unit
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
        const DirectionBuffers& dir = directions[di];
        const torch::Tensor &states = dir.states, &cells = dir.cells;
        torch::Tensor gh = torch::empty({rows, G * H}, x.options());
        int64_t computed = 0;
        for (int64_t k = 0; k < S; ++k) {
          const int64_t t = dir.shape.time(k), n = packed.active(t, block);
          computed += n;
          scalar_t* h = step_ptr<scalar_t>(states, k + 1) + first * H;
          const scalar_t* h_prev = step_ptr<scalar_t>(states, k) + first * H;
          // Rows past their sequences keep their state (zero, backwards, until their last token).
          std::memcpy(h + n * H, h_prev + n * H, sizeof(scalar_t) * (rows - n) * H);
          if (lstm) {
            std::memcpy(step_ptr<scalar_t>(cells, k + 1) + (first + n) * H, step_ptr<scalar_t>(cells, k) + (first + n) * H,
                        sizeof(scalar_t) * (rows - n) * H);
          }
          if (n == 0) continue;
          torch::Tensor gh_active = gh.narrow(0, 0, n);
          products.addmm_out(gh_active, bias_hh[di], step_rows(states, k, B, first, n), w_hh_t[di]);
          const scalar_t* g_in = gi[di].data_ptr<scalar_t>() + packed.offset(t, block) * G * H;
          scalar_t* z = step_ptr<scalar_t>(dir.saved, k) + first * Z * H;
          if (lstm) {
            lstm_forward(g_in, gh.data_ptr<scalar_t>(), step_ptr<scalar_t>(cells, k) + first * H, h,
                         step_ptr<scalar_t>(cells, k + 1) + first * H, z, n, H);
          } else {
            gates_forward(g_in, gh.data_ptr<scalar_t>(), h_prev, h, z, n, H);
          }
          scalar_t* out = step_ptr<scalar_t>(outputs, t) + first * D * H + d * H;
          for (int64_t r = 0; r < n; ++r) std::memcpy(out + r * D * H, h + r * H, sizeof(scalar_t) * H);
        }
        rows_computed += computed;
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
    const int64_t S = shape.S, B = shape.B, H = shape.H, G = lstm ? 4 : 3, Z = lstm ? 5 : 4;
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
        const DirectionBuffers& dir = directions[di];
        torch::Tensor dh = d_last[d].narrow(0, first, rows).clone();  // gradient of the state after slot k
        torch::Tensor dc = d_cell[d].narrow(0, first, rows).clone();
        torch::Tensor dh_step = torch::empty({rows, H}, opts);
        torch::Tensor dc_step = torch::empty({rows, H}, opts);
        int64_t computed = 0;
        for (int64_t k = S - 1; k >= 0; --k) {
          const int64_t t = dir.shape.time(k), n = packed.active(t, block);
          if (n == 0) continue;  // every row's state passes through unchanged
          computed += n;
          // The output at time t is the state after slot k where active, a constant zero elsewhere.
          scalar_t* g = dh.data_ptr<scalar_t>();
          const scalar_t* go = step_ptr<scalar_t>(d_outputs, t) + first * D * H + d * H;
          for (int64_t r = 0; r < n; ++r) {
            for (int64_t i = 0; i < H; ++i) g[r * H + i] += go[r * D * H + i];
          }
          std::memcpy(dh_step.data_ptr<scalar_t>() + n * H, g + n * H, sizeof(scalar_t) * (rows - n) * H);
          const scalar_t* z = step_ptr<scalar_t>(dir.saved, k) + first * Z * H;
          const int64_t token = packed.offset(t, block);
          scalar_t* dgates = dgi[di].data_ptr<scalar_t>() + token * G * H;
          const torch::Tensor dgates_h = dgh[di].narrow(0, token, n);
          torch::Tensor dh_active = dh_step.narrow(0, 0, n);
          if (lstm) {
            std::memcpy(dc_step.data_ptr<scalar_t>() + n * H, dc.data_ptr<scalar_t>() + n * H,
                        sizeof(scalar_t) * (rows - n) * H);
            lstm_backward(g, dc.data_ptr<scalar_t>(), z, step_ptr<scalar_t>(dir.cells, k) + first * H, dgates,
                          dh_step.data_ptr<scalar_t>(), dc_step.data_ptr<scalar_t>(), n, H);
            std::swap(dc, dc_step);
          } else {
            gates_backward(g, z, step_ptr<scalar_t>(dir.states, k) + first * H, dgates,
                           dgates_h.data_ptr<scalar_t>(), dh_step.data_ptr<scalar_t>(), n, H);
          }
          products.add_mm_(dh_active, dgates_h, w_hh[di]);
          std::swap(dh, dh_step);
        }
        rows_computed += computed;
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
  // product), at about half oneDNN's rate on AMD (docs/BENCHMARKS.md, 2026-12-03 evening).
  torch::Tensor w_embed, w_feed;

  DecoderStack(at::TensorList cell_weights, const torch::Tensor& h0, const torch::Tensor& c0,
               const torch::Tensor& between_mask, int64_t steps, bool is_lstm, bool bf16)
      : products{bf16} {
    L = static_cast<int64_t>(cell_weights.size()) / 4;
    TORCH_CHECK(L >= 1 && static_cast<int64_t>(cell_weights.size()) == 4 * L, "fused decoder: 4 tensors per layer");
    TORCH_CHECK(h0.dim() == 3 && h0.size(0) == L, "fused decoder: h0 must be [layers, B, H]");
    T = steps, B = h0.size(1), H = cell_weights[1].size(1), lstm = is_lstm, G = lstm ? 4 : 3, Z = lstm ? 5 : 4;
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
    lstm = ctx->saved_data["lstm"].toBool(), G = lstm ? 4 : 3, Z = lstm ? 5 : 4;
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

// The decoders' kernels run their rows in PackedRows's order, dealt by target length: a step runs
// each block's rows whose targets are still running, and everything of the others stays zero (their
// features past the target's end are zero and receive no gradient). target_lengths: [B] int64, or
// empty for every row all T steps.
torch::Tensor decoder_lengths(const torch::Tensor& target_lengths, int64_t batch, int64_t steps) {
  if (target_lengths.numel() == 0) return torch::full({batch}, steps, torch::kLong);
  const torch::Tensor lengths = to_lengths(target_lengths);
  check_inputs(lengths, batch, steps);
  return lengths;
}

// A decoder kernel's batch-indexed inputs in the kernel's row order.
struct DecoderInputs {
  torch::Tensor embedded, h0, c0, keys, values, lengths, between;

  DecoderInputs(const PackedRows& rows, const torch::Tensor& embedded_in, const torch::Tensor& h0_in,
                const torch::Tensor& c0_in, const torch::Tensor& keys_in, const torch::Tensor& values_in,
                const torch::Tensor& lengths_in, const torch::Tensor& between_in)
      : embedded(rows.to_kernel(embedded_in)),
        h0(rows.to_kernel(h0_in, 1)),
        c0(c0_in.numel() > 0 ? rows.to_kernel(c0_in, 1) : c0_in),
        keys(rows.to_kernel(keys_in)),
        values(rows.to_kernel(values_in)),
        lengths(to_lengths(lengths_in)),
        between(between_in.numel() > 0 ? rows.to_kernel(between_in, 1) : between_in) {
    check_inputs(lengths, embedded.size(0), keys.size(1));
    lengths = rows.to_kernel(lengths);
  }

  // The gradients of embedded, h0, c0, keys and values (result[0..4]) back in the caller's order.
  static void restore_order(const PackedRows& rows, variable_list& result) {
    result[0] = rows.to_caller(result[0]);
    result[1] = rows.to_caller(result[1], 1);
    if (result[2].defined()) result[2] = rows.to_caller(result[2], 1);
    result[3] = rows.to_caller(result[3]);
    result[4] = rows.to_caller(result[4]);
  }
};

void save_rows(AutogradContext* ctx, const torch::Tensor& target_lengths, const PackedRows& rows) {
  ctx->saved_data["target_lengths"] = target_lengths;
  ctx->saved_data["blocks"] = rows.blocks();
}
PackedRows saved_rows(AutogradContext* ctx, int64_t steps) {
  return {ctx->saved_data["target_lengths"].toTensor(), steps, ctx->saved_data["blocks"].toInt()};
}

// What both decoders' forward passes build before their time loops: the rows in the kernel's order,
// the stacked cells, the attention, the embeddings [T, B, E], and their share of layer 0's gates at
// the real tokens, for all of them at once: [N, G H]. `fed` names the input that layer 0 takes
// beside the embeddings (for the error where its weights do not take it).
struct DecoderForward {
  torch::Tensor target_lengths;
  PackedRows packed;
  DecoderInputs in;
  DecoderStack stack;
  StepAttention attention;
  torch::Tensor emb, ge;

  DecoderForward(const torch::Tensor& embedded, const torch::Tensor& h0, const torch::Tensor& c0,
                 const torch::Tensor& keys, const torch::Tensor& values, const torch::Tensor& lengths,
                 const torch::Tensor& target_lengths_in, at::TensorList cell_weights,
                 at::TensorList attention_parameters, const torch::Tensor& between_mask,
                 const AttentionConfig& attention_config, double scale, bool lstm, bool bf16, const char* fed)
      : target_lengths(decoder_lengths(target_lengths_in, embedded.size(0), embedded.size(1))),
        packed(target_lengths, embedded.size(1)),
        in(packed, embedded, h0, c0, keys, values, lengths, between_mask),
        stack(cell_weights, in.h0, in.c0, in.between, embedded.size(1), lstm, bf16),
        attention(attention_config, scale, attention_parameters, in.keys.contiguous(), in.values.contiguous(),
                  in.lengths, embedded.size(1), stack.products),
        emb(in.embedded.transpose(0, 1).contiguous()) {
    TORCH_CHECK(cell_weights[0].size(1) == embedded.size(2) + stack.H,
                "fused decoder: the recurrent input must be [embedding; ", fed, "]");
    ge = stack.products.addmm(cell_weights[2], packed.real(emb), stack.w_embed.t());
  }

  void save(AutogradContext* ctx) const {
    stack.save(ctx);
    attention.save(ctx);
    save_rows(ctx, target_lengths, packed);
    ctx->saved_data["emb"] = emb;
  }
};

// What both decoders' backward passes share: what DecoderForward saved, the features' gradient in the
// kernel's order [T, B, H], and the gradients the time loop fills: the gates' at the real tokens and
// the initial states' [L, B, H].
struct DecoderBackward {
  DecoderStack stack;
  StepAttention attention;
  torch::Tensor emb;
  PackedRows packed;
  torch::Tensor d_features;
  DecoderStack::RealGateGradients real;
  torch::Tensor dh0, dc0;

  DecoderBackward(AutogradContext* ctx, const torch::Tensor& features_gradient)
      : stack(ctx),
        attention(ctx),
        emb(ctx->saved_data["emb"].toTensor()),
        packed(saved_rows(ctx, stack.T)),
        d_features(packed.to_kernel(features_gradient).transpose(0, 1).contiguous()),
        real(stack.gate_gradients(packed)),
        dh0(torch::empty({stack.L, stack.B, stack.H}, emb.options())),
        dc0(stack.lstm ? torch::empty({stack.L, stack.B, stack.H}, emb.options()) : torch::Tensor()) {}

  // After the time loop, the whole-batch products over the real tokens: the embeddings' gradient,
  // layer 0's w_ih gradient in two parts (the embeddings' columns and those of `fed` [T, B, H], the
  // input fed to layer 0 beside them), the decoder's `extra` products, then the stack's. Returns the
  // gradients of the function's inputs from the embeddings to the attention's parameters, in order,
  // then the extra products. queries [T, B, H]: the top layer's states that queried the attention.
  variable_list gradients(const torch::Tensor& fed, const torch::Tensor& queries,
                          const std::vector<Factors>& extra) const {
    const torch::Tensor& dgi0 = real.dgi[0];
    std::vector<Factors> factors = {{dgi0, stack.w_embed}, {dgi0.t(), packed.real(emb)}, {dgi0.t(), packed.real(fed)}};
    factors.insert(factors.end(), extra.begin(), extra.end());
    stack.add_weight_gradient_factors(factors, real, packed);
    std::vector<torch::Tensor> outs(factors.size());
    const torch::Tensor dw_ih0 = stack.layer0_input_weight_gradient(outs, 1);
    const std::vector<torch::Tensor> product = stack.products.mm_each(factors, outs);
    variable_list result = {packed.unpacked(product[0]).transpose(0, 1), dh0, dc0};
    attention.append_input_gradients(result);
    DecoderInputs::restore_order(packed, result);
    result.emplace_back();  // lengths
    result.emplace_back();  // target lengths
    const auto stack_products = product.begin() + static_cast<std::ptrdiff_t>(3 + extra.size());
    stack.append_weight_gradients(result, real, dw_ih0, stack_products);
    attention.append_parameter_gradients(result, queries, packed.tokens());
    result.insert(result.end(), product.begin() + 3, stack_products);
    return result;
  }
};

// The LuongDecoder: input feeding into the bottom layer, attention from the top one, and an optional
// dropout mask on h~ (the paper's dropout on the attentional vector, which feeds both the output layer
// and the next step): the features are h~ * mask, and the unmasked tanh is kept.
struct LuongTeacherForcedFunction : torch::autograd::Function<LuongTeacherForcedFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& embedded_in, const torch::Tensor& h0,
                               const torch::Tensor& c0, const torch::Tensor& keys, const torch::Tensor& values,
                               const torch::Tensor& lengths_in, const torch::Tensor& target_lengths_in,
                               at::TensorList cell_weights, at::TensorList attention_parameters,
                               const torch::Tensor& wc_weight, const torch::Tensor& wc_bias,
                               const torch::Tensor& mask, const torch::Tensor& between_mask,
                               const AttentionConfig& attention_config, double scale, bool lstm, bool bf16) {
    RECORD_FUNCTION("luong::LuongTeacherForcedFunction::forward", std::vector<c10::IValue>());
    const DecoderForward run(embedded_in, h0, c0, keys, values, lengths_in, target_lengths_in, cell_weights,
                             attention_parameters, between_mask, attention_config, scale, lstm, bf16, "h~");
    const PackedRows& packed = run.packed;
    const DecoderStack& stack = run.stack;
    const StepAttention& attention = run.attention;
    const MatrixProducts& products = stack.products;
    const torch::Tensor &emb = run.emb, &ge = run.ge;
    const int64_t B = stack.B, T = stack.T, H = stack.H, G = stack.G;
    const bool masked = mask.numel() > 0;
    const torch::TensorOptions opts = emb.options();
    torch::Tensor attentional = torch::zeros({T + 1, B, H}, opts);  // h~_0 .. h~_T (masked)
    torch::Tensor unmasked = masked ? torch::empty({T, B, H}, opts) : torch::empty({0}, opts);
    const torch::Tensor drop = masked ? packed.to_kernel(mask).transpose(0, 1).contiguous() : mask;  // [T, B, H]
    const PanelOperand w_feed_t = products.panel_operand(stack.w_feed.t());
    const torch::Tensor wc_operand = products.operand(wc_weight.detach());
    const PanelOperand wc_t = products.panel_operand(wc_operand.t());
    const torch::Tensor bias_c = wc_bias.detach();
    const torch::Tensor& top = stack.states[stack.L - 1];
    const torch::Tensor& ch = attention.contexts();  // [c_t; h_t]
    StepTeam team;
    AT_DISPATCH_FLOATING_TYPES(emb.scalar_type(), "fused_luong_teacher_forced", [&] {
      packed.for_blocks_side_by_side([&](int64_t block, int64_t first, int64_t rows, bool side_by_side) {
        const BlockProducts step{products, side_by_side && StepTeam::takes(products) ? &team : nullptr, block};
        const StepTeam::Member member(step.team);
        torch::Tensor gi_rows = torch::empty({rows, G * H}, opts);
        torch::Tensor gh_rows = torch::empty({rows, G * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        int64_t computed = 0;
        for (int64_t t = 0; t < T; ++t) {
          // The block's rows run longest first; in a team it makes the products (of no rows) until
          // the other block is done too.
          if (!step.runs_step(packed, t)) break;
          const int64_t n = packed.active(t, block);
          computed += n;
          torch::Tensor gi = gi_rows.narrow(0, 0, n), gh = gh_rows.narrow(0, 0, n);
          step.addmm_out(gi, ge.narrow(0, packed.offset(t, block), n), step_rows(attentional, t, B, first, n), w_feed_t);
          stack.forward_step<scalar_t>(step, t, first, n, gi, gh);
          if (n > 0) attention.forward_step<scalar_t>(t, first, n, step_rows(top, t + 1, B, first, n), workspace);
          torch::Tensor next = step_rows(attentional, t + 1, B, first, n);
          step.addmm_out(next, bias_c, step_rows(ch, t, B, first, n), wc_t);
          next.tanh_();
          if (masked) {
            step_rows(unmasked, t, B, first, n).copy_(next);
            next.mul_(step_rows(drop, t, B, first, n));
          }
        }
        rows_computed += computed;
      });
    });
    run.save(ctx);
    ctx->saved_data["attentional"] = attentional;
    ctx->saved_data["unmasked"] = unmasked;
    ctx->saved_data["drop"] = drop;
    ctx->saved_data["wc_operand"] = wc_operand;
    return {packed.to_caller(attentional.narrow(0, 1, T).transpose(0, 1))};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    DecoderBackward run(ctx, grads[0]);
    const DecoderStack& stack = run.stack;
    StepAttention& attention = run.attention;
    const PackedRows& packed = run.packed;
    const torch::Tensor attentional = ctx->saved_data["attentional"].toTensor();
    const torch::Tensor unmasked = ctx->saved_data["unmasked"].toTensor();
    const torch::Tensor drop = ctx->saved_data["drop"].toTensor();
    const torch::Tensor wc_operand = ctx->saved_data["wc_operand"].toTensor();
    const bool masked = drop.numel() > 0;
    const int64_t T = stack.T, B = stack.B, H = stack.H;
    const torch::TensorOptions opts = run.emb.options();
    torch::Tensor dpre = torch::empty({packed.tokens().size(0), H}, opts);  // packed, as the gate gradients
    const MatrixProducts& products = stack.products;
    const PanelOperand w_feed = products.panel_operand(stack.w_feed);
    const PanelOperand wc = products.panel_operand(wc_operand);
    const torch::Tensor& top = stack.states[stack.L - 1];
    StepTeam team;
    AT_DISPATCH_FLOATING_TYPES(run.emb.scalar_type(), "fused_luong_teacher_forced_backward", [&] {
      packed.for_blocks_side_by_side([&](int64_t block, int64_t first, int64_t rows, bool side_by_side) {
        const BlockProducts step{products, side_by_side && StepTeam::takes(products) ? &team : nullptr, block};
        const StepTeam::Member member(step.team);
        // From step t+1's input; zero for a row until its last step, where the backward loop reaches it.
        torch::Tensor d_attentional_rows = torch::zeros({rows, H}, opts);
        DecoderStack::Carried carried = stack.carried(run.dh0, run.dc0, first, rows);
        torch::Tensor dh_rows = torch::empty({rows, H}, opts);
        torch::Tensor dch_rows = torch::empty({rows, 2 * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        scalar_t* d_att = d_attentional_rows.data_ptr<scalar_t>();
        int64_t computed = 0;
        for (int64_t t = T - 1; t >= 0; --t) {
          if (!step.runs_step(packed, t)) continue;  // (as forward)
          const int64_t n = packed.active(t, block), token = packed.offset(t, block);
          computed += n;
          const scalar_t* d_feat = step_ptr<scalar_t>(run.d_features, t) + first * H;
          for (int64_t i = 0; i < n * H; ++i) d_att[i] += d_feat[i];
          if (masked) {
            const scalar_t* m = step_ptr<scalar_t>(drop, t) + first * H;
            for (int64_t i = 0; i < n * H; ++i) d_att[i] *= m[i];
            tanh_backward(d_att, step_ptr<scalar_t>(unmasked, t) + first * H, dpre.data_ptr<scalar_t>() + token * H,
                          n * H);
          } else {
            tanh_backward(d_att, step_ptr<scalar_t>(attentional, t + 1) + first * H,
                          dpre.data_ptr<scalar_t>() + token * H, n * H);
          }
          torch::Tensor dch = dch_rows.narrow(0, 0, n), dh_step = dh_rows.narrow(0, 0, n);
          step.mm_out(dch, dpre.narrow(0, token, n), wc);
          // dh_step: the query's and Wc's paths to the top layer's h_t.
          if (n > 0) {
            attention.backward_step<scalar_t>(t, first, n, step_rows(top, t + 1, B, first, n), dch.data_ptr<scalar_t>(),
                                              dh_step, workspace);
          }
          DecoderStack::Carried active = DecoderStack::first_rows(carried, n);
          stack.backward_step<scalar_t>(step, t, first, n, token, dh_step, active, run.real.dgi, run.real.dgh);
          torch::Tensor d_attentional = d_attentional_rows.narrow(0, 0, n);
          step.mm_out(d_attentional, run.real.dgi[0].narrow(0, token, n), w_feed);
        }
        rows_computed += computed;
      });
    });
    // W_c's weight gradient among the whole-batch products.
    variable_list result = run.gradients(attentional.narrow(0, 0, T), top.narrow(0, 1, T),
                                         {{dpre.t(), packed.real(attention.contexts())}});
    result.push_back(dpre.sum(0));
    for (int i = 0; i < 6; ++i) result.emplace_back();  // the masks, the attention's configuration, scale, lstm, bf16
    return result;
  }
};

// The notebook's Decoder: attention from the top layer's previous state h_{t-1}, its context fed into
// the bottom layer beside the embedding; the features are the top layer's h_t (their dropout, which
// feeds nothing else, is the caller's).
struct BahdanauTeacherForcedFunction : torch::autograd::Function<BahdanauTeacherForcedFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& embedded_in, const torch::Tensor& h0,
                               const torch::Tensor& c0, const torch::Tensor& keys, const torch::Tensor& values,
                               const torch::Tensor& lengths_in, const torch::Tensor& target_lengths_in,
                               at::TensorList cell_weights, at::TensorList attention_parameters,
                               const torch::Tensor& between_mask, const AttentionConfig& attention_config, double scale,
                               bool lstm, bool bf16) {
    RECORD_FUNCTION("luong::BahdanauTeacherForcedFunction::forward", std::vector<c10::IValue>());
    const DecoderForward run(embedded_in, h0, c0, keys, values, lengths_in, target_lengths_in, cell_weights,
                             attention_parameters, between_mask, attention_config, scale, lstm, bf16, "context");
    const PackedRows& packed = run.packed;
    const DecoderStack& stack = run.stack;
    const StepAttention& attention = run.attention;
    const MatrixProducts& products = stack.products;
    const torch::Tensor &emb = run.emb, &ge = run.ge;
    const int64_t B = stack.B, T = stack.T, H = stack.H, G = stack.G;
    const torch::TensorOptions opts = emb.options();
    const PanelOperand w_context_t = products.panel_operand(stack.w_feed.t());
    const torch::Tensor& top = stack.states[stack.L - 1];
    const torch::Tensor& ch = attention.contexts();  // [c_t; h_{t-1}]
    AT_DISPATCH_FLOATING_TYPES(emb.scalar_type(), "fused_bahdanau_teacher_forced", [&] {
      packed.for_blocks([&](int64_t block, int64_t first, int64_t rows) {
        torch::Tensor gi_rows = torch::empty({rows, G * H}, opts);
        torch::Tensor gh_rows = torch::empty({rows, G * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        int64_t computed = 0;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t n = packed.active(t, block);
          if (n == 0) break;  // the block's rows run longest first
          computed += n;
          torch::Tensor gi = gi_rows.narrow(0, 0, n), gh = gh_rows.narrow(0, 0, n);
          attention.forward_step<scalar_t>(t, first, n, step_rows(top, t, B, first, n), workspace);
          products.addmm_out(gi, ge.narrow(0, packed.offset(t, block), n), step_rows(ch, t, B, first, n).narrow(1, 0, H),
                             w_context_t);
          stack.forward_step<scalar_t>({products}, t, first, n, gi, gh);
        }
        rows_computed += computed;
      });
    });
    run.save(ctx);
    return {packed.to_caller(top.narrow(0, 1, T).transpose(0, 1))};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    DecoderBackward run(ctx, grads[0]);
    const DecoderStack& stack = run.stack;
    StepAttention& attention = run.attention;
    const PackedRows& packed = run.packed;
    const int64_t T = stack.T, B = stack.B, H = stack.H;
    const torch::TensorOptions opts = run.emb.options();
    const MatrixProducts& products = stack.products;
    const PanelOperand w_context = products.panel_operand(stack.w_feed);
    const torch::Tensor& top = stack.states[stack.L - 1];
    AT_DISPATCH_FLOATING_TYPES(run.emb.scalar_type(), "fused_bahdanau_teacher_forced_backward", [&] {
      packed.for_blocks([&](int64_t block, int64_t first, int64_t rows) {
        DecoderStack::Carried carried = stack.carried(run.dh0, run.dc0, first, rows);
        torch::Tensor dh_rows = torch::empty({rows, H}, opts);
        torch::Tensor dquery_rows = torch::empty({rows, H}, opts);
        // [d context; 0]: h_{t-1} enters only as the query
        torch::Tensor dch_rows = torch::zeros({rows, 2 * H}, opts);
        StepAttention::Workspace workspace = attention.workspace(rows);
        int64_t computed = 0;
        for (int64_t t = T - 1; t >= 0; --t) {
          const int64_t n = packed.active(t, block), token = packed.offset(t, block);
          if (n == 0) continue;
          computed += n;
          torch::Tensor dh_step = dh_rows.narrow(0, 0, n), dquery = dquery_rows.narrow(0, 0, n);
          dh_step.copy_(step_rows(run.d_features, t, B, first, n));
          DecoderStack::Carried active = DecoderStack::first_rows(carried, n);
          stack.backward_step<scalar_t>({products}, t, first, n, token, dh_step, active, run.real.dgi, run.real.dgh);
          torch::Tensor d_context = dch_rows.narrow(0, 0, n).narrow(1, 0, H);
          products.mm_out(d_context, run.real.dgi[0].narrow(0, token, n), w_context);
          attention.backward_step<scalar_t>(t, first, n, step_rows(top, t, B, first, n), dch_rows.data_ptr<scalar_t>(),
                                            dquery, workspace);
          active.dh[stack.L - 1].add_(dquery);
        }
        rows_computed += computed;
      });
    });
    variable_list result = run.gradients(attention.contexts().narrow(2, 0, H), top.narrow(0, 0, T), {});
    for (int i = 0; i < 5; ++i) result.emplace_back();  // the mask, the attention's configuration, scale, lstm, bf16
    return result;
  }
};

}  // namespace

namespace {

torch::Tensor empty_lengths() { return torch::empty({0}, torch::kLong); }

// w_ih, w_hh, b_ih, b_hh per layer (bottom first) or direction: the kernels take their cells as one list.
std::vector<torch::Tensor> flat_weights(const std::vector<CellWeights>& layers) {
  std::vector<torch::Tensor> flat;
  for (const CellWeights& w : layers) flat.insert(flat.end(), {w.w_ih, w.w_hh, w.b_ih, w.b_hh});
  return flat;
}

// One or two directions of a layer through RecurrentLayerFunction: outputs [B, S, D H], hidden (and
// cell) [D, B, H].
FusedLayerOutput recurrent_layer(const torch::Tensor& x, const torch::Tensor& lengths,
                                 const std::vector<CellWeights>& directions, bool lstm, bool reverse) {
  TORCH_CHECK(x.device().is_cpu(), "the fused recurrent layer runs on the CPU");
  const FusedKernelCall call(directions.at(0).w_ih);
  const std::vector<torch::Tensor> flat = flat_weights(directions);
  variable_list out =
      RecurrentLayerFunction::apply(call.input(x), lengths, at::TensorList(flat), lstm, reverse, call.bf16);
  return {out[0], out[1], lstm ? out[2] : torch::Tensor()};
}

}  // namespace

int64_t fused_recurrent_rows_computed() { return rows_computed.load(); }

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

torch::Tensor fused_luong_teacher_forced(const torch::Tensor& embedded, const torch::Tensor& h0, const torch::Tensor& c0,
                                         const torch::Tensor& keys, const torch::Tensor& values,
                                         const torch::Tensor& src_lengths, const std::vector<CellWeights>& layers,
                                         bool lstm, const torch::Tensor& wc_weight, const torch::Tensor& wc_bias,
                                         const FusedAttentionParameters& attention, const torch::Tensor& dropout_mask,
                                         const torch::Tensor& between_layers_mask, const torch::Tensor& target_lengths) {
  TORCH_CHECK(embedded.device().is_cpu(), "fused_luong_teacher_forced runs on the CPU");
  const FusedKernelCall call(wc_weight);
  const std::vector<torch::Tensor> cell_weights = flat_weights(layers);
  const torch::Tensor empty = torch::empty({0}, wc_weight.options());
  const auto or_empty = [&](const torch::Tensor& t) { return t.defined() ? call.input(t) : empty; };
  return LuongTeacherForcedFunction::apply(call.input(embedded), call.input(h0), lstm ? call.input(c0) : empty,
                                           call.input(keys), call.input(values), src_lengths,
                                           target_lengths.defined() ? target_lengths : empty_lengths(),
                                           at::TensorList(cell_weights), at::TensorList(attention.tensors), wc_weight,
                                           wc_bias, or_empty(dropout_mask), or_empty(between_layers_mask),
                                           attention.config, attention.scale, lstm, call.bf16)[0];
}

torch::Tensor fused_bahdanau_teacher_forced(const torch::Tensor& embedded, const torch::Tensor& h0,
                                            const torch::Tensor& c0, const torch::Tensor& keys,
                                            const torch::Tensor& values, const torch::Tensor& src_lengths,
                                            const std::vector<CellWeights>& layers, bool lstm,
                                            const FusedAttentionParameters& attention,
                                            const torch::Tensor& between_layers_mask,
                                            const torch::Tensor& target_lengths) {
  TORCH_CHECK(embedded.device().is_cpu(), "fused_bahdanau_teacher_forced runs on the CPU");
  const FusedKernelCall call(layers.at(0).w_ih);
  const std::vector<torch::Tensor> cell_weights = flat_weights(layers);
  const torch::Tensor empty = torch::empty({0}, layers[0].w_ih.options());
  return BahdanauTeacherForcedFunction::apply(
      call.input(embedded), call.input(h0), lstm ? call.input(c0) : empty, call.input(keys), call.input(values),
      src_lengths, target_lengths.defined() ? target_lengths : empty_lengths(), at::TensorList(cell_weights),
      at::TensorList(attention.tensors),
      between_layers_mask.defined() ? call.input(between_layers_mask) : empty, attention.config, attention.scale, lstm,
      call.bf16)[0];
}

}  // namespace luong::models
