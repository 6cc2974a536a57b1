#pragma once
// The GRU and LSTM cells' gate arithmetic for one step over B rows, forward and backward, which the
// fused recurrent layer (fused_recurrence.cpp) and the decoders' stack (decoder_stack.h) run. No
// LibTorch here: recurrent_cells.cpp compiles each loop for AVX-512, AVX2 + FMA and baseline x86-64.
//
// GRU: gi, gh [B, 3H] (x W_ih^T + b_ih, h W_hh^T + b_hh; gates r | z | n), saved [B, 4H]
// (r | z | n | h W_hn^T + b_hn). LSTM: gi, gh [B, 4H] (gates i | f | g | o), saved [B, 5H]
// (i | f | g | o | tanh c'). The backward passes overwrite their outputs.
#include <cstdint>

namespace luong::models::cells {

// A cell's gates per unit (the G in [B, G H]) and the values its forward pass saves per unit.
constexpr int64_t gate_count(bool lstm) { return lstm ? 4 : 3; }
constexpr int64_t saved_count(bool lstm) { return lstm ? 5 : 4; }

#define LUONG_CELL_DECLARATIONS(T)                                                                          \
  void gates_forward(const T* gi, const T* gh, const T* h_prev, T* h_next, T* saved, int64_t B, int64_t H);   \
  void gates_backward(const T* dh, const T* saved, const T* h_prev, T* dgi, T* dgh, T* dh_prev, int64_t B,     \
                      int64_t H);                                                                            \
  void lstm_forward(const T* gi, const T* gh, const T* c_prev, T* h_next, T* c_next, T* saved, int64_t B,      \
                    int64_t H);                                                                              \
  void lstm_backward(const T* dh, const T* dc, const T* saved, const T* c_prev, T* dgates, T* dh_prev,         \
                     T* dc_prev, int64_t B, int64_t H);
LUONG_CELL_DECLARATIONS(float)
LUONG_CELL_DECLARATIONS(double)
#undef LUONG_CELL_DECLARATIONS

// grad (1 - y^2) into out: tanh's backward through its output y.
template <typename T>
void tanh_backward(const T* grad, const T* y, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * (T(1) - y[i] * y[i]);
}

}  // namespace luong::models::cells
