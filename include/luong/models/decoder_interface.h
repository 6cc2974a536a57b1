#pragma once
// What both decoders share: the recurrent state, one step's result, and the single `step` that
// teacher-forced training, greedy and beam decoding and tracing all call.
#include <torch/torch.h>

#include <memory>

#include "luong/models/attention.h"

namespace luong::models {

enum class DecoderKind {
  kBahdanau,  ///< the notebook's `Decoder`: attention on h_{t-1}, context fed into the GRU
  kLuong,     ///< the notebook's `LuongDecoder`: input feeding, attention on h_t, h~ = tanh(Wc[c; h_t])
};

struct DecoderOptions {
  DecoderOptions(int64_t vocab_size, int64_t embed_size, int64_t hidden_size)
      : vocab_size_(vocab_size), embed_size_(embed_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, vocab_size);
  TORCH_ARG(int64_t, embed_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(int64_t, layers) = 1;
  /// Dropout between GRU layers (layers > 1).
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(AttentionConfig, attention) = AttentionConfig{};
  /// On the CPU, use the hand-differentiated kernels where they apply: the teacher-forced
  /// LuongDecoder with one layer and global dot/general attention (fused_recurrence.h), and the
  /// vocabulary projection with its cross-entropy (linear_cross_entropy.h).
  TORCH_ARG(bool, fused) = true;
};

struct DecoderState {
  torch::Tensor hidden;       ///< [layers, B, H]
  torch::Tensor attentional;  ///< h~_{t-1} [B, H] (LuongDecoder's input feeding); undefined otherwise

  DecoderState index_select(const torch::Tensor& rows) const;
};

struct DecoderStep {
  torch::Tensor features;   ///< [B, H]: what `fc` turns into logits (h_t, or h~_t for LuongDecoder)
  torch::Tensor weights;    ///< [B, S] attention weights of this step
  torch::Tensor positions;  ///< [B] aligned position p_t for local attention, else undefined
  DecoderState state;       ///< the state after this step
};

/// Teacher forcing's result.
struct TeacherForced {
  torch::Tensor features;  ///< [B, T, H]: what `fc` turns into logits
  torch::Tensor weights;   ///< [B, T, S] attention weights; undefined unless asked for
};

class DecoderInterface : public torch::nn::Module {
 public:
  /// encoder_hidden [layers, B, H] -> the state before the first step.
  virtual DecoderState initial_state(const torch::Tensor& encoder_hidden) = 0;
  /// previous_word [B] int64, state, memory from attention().prepare, step index t -> one step.
  virtual DecoderStep step(const torch::Tensor& previous_word, const DecoderState& state,
                           const AttentionMemory& memory, int64_t t) = 0;
  /// features [..., H] -> logits [..., V].
  torch::Tensor project(const torch::Tensor& features) { return fc(features); }

  /// Teacher forcing over dec_in [B, T] (<sos> + target) from `state`: every step of `step`, or a
  /// fused kernel where the decoder has one (never when `keep_weights`).
  virtual TeacherForced teacher_forced(const torch::Tensor& dec_in, const DecoderState& state,
                                       const AttentionMemory& memory, bool keep_weights);
  /// Cross-entropy of features [N, H] against targets [N] -> [N]: the vocabulary projection and the
  /// loss as one fused node on the CPU (options.fused), LibTorch's ops elsewhere.
  torch::Tensor token_losses(const torch::Tensor& features, const torch::Tensor& targets);

  virtual AttentionImpl& attention() = 0;
  virtual const DecoderOptions& decoder_options() const = 0;
  /// Switches the fused kernels on or off (DecoderOptions::fused).
  virtual void set_fused(bool fused) = 0;

  torch::nn::Embedding embedding{nullptr};
  torch::nn::GRU gru{nullptr};
  torch::nn::Linear fc{nullptr};
};

/// One GRU time step through the weights of `gru` (torch::gru_cell per layer, so the state dict
/// keeps nn.GRU's names). input [B, I], hidden [layers, B, H] -> new hidden [layers, B, H].
torch::Tensor gru_step(torch::nn::GRU& gru, const torch::Tensor& input, const torch::Tensor& hidden, double dropout,
                       bool training);

/// Builds the decoder of `kind`.
std::shared_ptr<DecoderInterface> make_decoder(DecoderKind kind, const DecoderOptions& options);

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::DecoderKind> {
  static constexpr std::pair<luong::models::DecoderKind, const char*> values[] = {
      {luong::models::DecoderKind::kLuong, "luong"}, {luong::models::DecoderKind::kBahdanau, "bahdanau"}};
};
