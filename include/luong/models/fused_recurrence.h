#pragma once
// The two recurrences of training, each as one autograd node with a hand-written backward pass
// through time: a single-layer GRU over a padded batch (the encoder) and the teacher-forced
// LuongDecoder with global dot/general attention. At the notebook's sizes (hidden 64, batch 32)
// LibTorch spends most of a training step recording and replaying ~100 tiny autograd ops per time
// step; here each step is two or three matrix products plus plain loops, and the weight gradients
// are one product over all steps. CPU only, float32 or float64; the module path
// (Seq2SeqImpl::decode_teacher_forced) computes the same function and is the reference in tests.
#include <torch/torch.h>

#include <utility>

namespace luong::models {

/// One GRU layer's parameters in nn::GRU's layout: w_ih [3H, I], w_hh [3H, H], b_ih [3H], b_hh [3H],
/// gate rows in the order r, z, n.
struct GruWeights {
  torch::Tensor w_ih, w_hh, b_ih, b_hh;
  /// The first layer (forward direction) of `gru`.
  static GruWeights of(torch::nn::GRU& gru);
};

/// nn::GRU (one layer, one direction, zero initial state) over a packed sequence, on a padded batch:
/// x [B, S, I], lengths [B] int64 (1 <= lengths[b] <= S) -> outputs [B, S, H], zero past each
/// length, and the state after each sequence's last token [B, H].
std::pair<torch::Tensor, torch::Tensor> fused_gru_sequence(const torch::Tensor& x, const torch::Tensor& lengths,
                                                           const GruWeights& gru);

/// The LuongDecoder's teacher-forced recurrence with global attention:
///   h_t = GRU([e_t; h~_{t-1}], h_{t-1}),  h~_0 = 0
///   a_t = softmax over j < src_lengths[b] of scale * keys[b, j] . h_t
///   h~_t = tanh(Wc [sum_j a_tj values[b, j]; h_t] + bc)
/// embedded [B, T, E], h0 [B, H], keys and values [B, S, H] (the same tensor for dot scores),
/// src_lengths [B] int64, gru over inputs of size E + H, wc_weight [H, 2H], wc_bias [H]
/// -> h~ for every step [B, T, H].
torch::Tensor fused_luong_teacher_forced(const torch::Tensor& embedded, const torch::Tensor& h0,
                                         const torch::Tensor& keys, const torch::Tensor& values,
                                         const torch::Tensor& src_lengths, const GruWeights& gru,
                                         const torch::Tensor& wc_weight, const torch::Tensor& wc_bias, double scale);

}  // namespace luong::models
