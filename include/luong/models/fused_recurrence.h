#pragma once
// The recurrences of training, each as one autograd node with a hand-written backward pass through
// time: a GRU or LSTM layer over a padded batch in one direction or both (the encoder's layers) and the
// teacher-forced LuongDecoder and the notebook's Decoder with any attention (global, local-m or
// local-p; dot, general, concat or location: models/fused_attention.h). At the notebook's sizes (hidden 64, batch 32)
// LibTorch spends most of a training step recording and replaying ~100 tiny autograd ops per time
// step; here each step is two or three matrix products plus plain loops, and the weight gradients
// are one product over all steps. CPU only, float32 or float64; the module path
// (Seq2SeqImpl::decode_teacher_forced) computes the same function and is the reference in tests.
#include <torch/torch.h>

#include <utility>
#include <vector>

#include "luong/models/fused_attention.h"
#include "luong/models/recurrent.h"

namespace luong::models {

/// One layer and direction's parameters in nn::GRU / nn::LSTM's layout: w_ih [G H, I], w_hh [G H, H],
/// b_ih [G H], b_hh [G H], gate rows r | z | n (GRU, G = 3) or i | f | g | o (LSTM, G = 4).
struct CellWeights {
  torch::Tensor w_ih, w_hh, b_ih, b_hh;
  /// The first layer (forward direction) of `gru`.
  static CellWeights of(torch::nn::GRU& gru);
  /// Layer `layer`, direction `direction` (0 forward, 1 backward) of a stack.
  static CellWeights of(const RecurrentLayers& layers, int64_t layer, int64_t direction);
};
using GruWeights = CellWeights;

/// nn::GRU (one layer, one direction, zero initial state) over a packed sequence, on a padded batch:
/// x [B, S, I], lengths [B] int64 (1 <= lengths[b] <= S) -> outputs [B, S, H], zero past each
/// length, and the state after each sequence's last token [B, H].
std::pair<torch::Tensor, torch::Tensor> fused_gru_sequence(const torch::Tensor& x, const torch::Tensor& lengths,
                                                           const GruWeights& gru);

struct FusedLayerOutput {
  torch::Tensor outputs;  ///< [B, S, H], zero past each length
  torch::Tensor hidden;   ///< [B, H]: the state after the direction's last real token
  torch::Tensor cell;     ///< [B, H] for LSTM, undefined for GRU
};

/// One GRU or LSTM layer in one direction over a padded batch, as nn.GRU / nn.LSTM computes it over a
/// packed sequence: x [B, S, I], lengths [B] int64 (1 <= lengths[b] <= S). `reverse` runs each
/// sequence from its own last token back to its first, from a zero state (a bidirectional stack's
/// backward direction). One autograd node; the input projection and the weight gradients are one
/// product over all steps.
FusedLayerOutput fused_recurrent_layer(const torch::Tensor& x, const torch::Tensor& lengths, const CellWeights& weights,
                                       bool lstm, bool reverse);

/// Both directions of a bidirectional GRU or LSTM layer (forwards, then backwards as
/// fused_recurrent_layer's `reverse`) as one autograd node: x [B, S, I], lengths [B] -> outputs
/// [B, S, 2H] (the forward direction's, then the backward's), hidden (and cell for LSTM) [2, B, H].
/// The same function as the two directions apart, concatenated; the directions run side by side on
/// the intra-op threads.
FusedLayerOutput fused_bidirectional_layer(const torch::Tensor& x, const torch::Tensor& lengths,
                                           const CellWeights& forwards, const CellWeights& backwards, bool lstm);


/// The LuongDecoder's teacher-forced recurrence, L stacked GRU or LSTM layers:
///   h^1_t = RNN_1([e_t; h~_{t-1}], h^1_{t-1}),  h^l_t = RNN_l(h^{l-1}_t * m^{l-1}_t, h^l_{t-1}),  h~_0 = 0
///   a_t = the attention's weights for query h^L_t at step t (global dot: softmax over j < src_lengths[b]
///         of scale * keys[b, j] . h^L_t; the others as their modules compute them)
///   h~_t = tanh(Wc [sum_j a_tj values[b, j]; h^L_t] + bc) * mask_t   (mask: dropout, scaled; or none)
/// embedded [B, T, E], h0 (and c0 for LSTM) [L, B, H], keys and values [B, S, H] (the attention
/// module's prepared keys and the encoder's outputs), src_lengths [B] int64, the cells bottom first
/// (the first over inputs of size E + H, the others over H), wc_weight [H, 2H], wc_bias [H],
/// `attention` (FusedAttentionParameters::of the decoder's module), dropout_mask [B, T, H] or
/// undefined, between_layers_mask (m above: dropout on each layer's output that feeds the next)
/// [L - 1, B, T, H] or undefined -> h~ for every step [B, T, H]. target_lengths [B] int64: the steps of
/// each row that count (its loss's); the kernel skips the others, and the features there are zero and
/// take no gradient. Undefined: all T steps of every row.
torch::Tensor fused_luong_teacher_forced(const torch::Tensor& embedded, const torch::Tensor& h0, const torch::Tensor& c0,
                                         const torch::Tensor& keys, const torch::Tensor& values,
                                         const torch::Tensor& src_lengths, const std::vector<CellWeights>& layers,
                                         bool lstm, const torch::Tensor& wc_weight, const torch::Tensor& wc_bias,
                                         const FusedAttentionParameters& attention, const torch::Tensor& dropout_mask = {},
                                         const torch::Tensor& between_layers_mask = {},
                                         const torch::Tensor& target_lengths = {});

/// The notebook's Decoder (attention before the recurrence), teacher-forced, L stacked GRU or LSTM
/// layers:
///   a_t = the attention's weights for query h^L_{t-1} at step t,  c_t = sum_j a_tj values[b, j]
///   h^1_t = RNN_1([e_t; c_t], h^1_{t-1}),  h^l_t = RNN_l(h^{l-1}_t * m^{l-1}_t, h^l_{t-1})
/// with the shapes of fused_luong_teacher_forced -> the top layer's h_t for every step [B, T, H].
torch::Tensor fused_bahdanau_teacher_forced(const torch::Tensor& embedded, const torch::Tensor& h0,
                                            const torch::Tensor& c0, const torch::Tensor& keys,
                                            const torch::Tensor& values, const torch::Tensor& src_lengths,
                                            const std::vector<CellWeights>& layers, bool lstm,
                                            const FusedAttentionParameters& attention,
                                            const torch::Tensor& between_layers_mask = {},
                                            const torch::Tensor& target_lengths = {});

}  // namespace luong::models
