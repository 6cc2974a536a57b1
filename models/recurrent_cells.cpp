#include "recurrent_cells.h"

#include "luong/util/target_clones.h"
#include "luong/util/vector_math.h"

namespace luong::models::cells {

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

}  // namespace luong::models::cells
