#pragma once
// What both decoders share: the recurrent state, one step's result, the output projection, and the
// single `step` that teacher-forced training, greedy and beam decoding and tracing all call.
#include <torch/torch.h>

#include <memory>

#include "luong/models/attention.h"
#include "luong/models/recurrent.h"

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
  TORCH_ARG(CellKind, cell) = CellKind::kGru;
  TORCH_ARG(int64_t, layers) = 1;
  /// Dropout as the paper applies it (training only): on the embeddings, between the layers and on
  /// the features fed to the output layer (the attentional vector h~ for LuongDecoder).
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(AttentionConfig, attention) = AttentionConfig{};
  /// The output projection reuses the embedding matrix (needs embed_size == hidden_size).
  TORCH_ARG(bool, tie_embeddings) = false;
  /// On the CPU, use the hand-differentiated kernels: the teacher-forced recurrence of either
  /// decoder, any depth, cell and attention (fused_recurrence.h, fused_attention.h), and the
  /// vocabulary projection with its cross-entropy (linear_cross_entropy.h).
  TORCH_ARG(bool, fused) = true;
};

struct DecoderState {
  RecurrentState recurrent;   ///< [layers, B, H] (and the LSTM cell)
  torch::Tensor attentional;  ///< h~_{t-1} [B, H] (LuongDecoder's input feeding); undefined otherwise

  DecoderState index_select(const torch::Tensor& rows) const;
};

struct DecoderStep {
  torch::Tensor features;   ///< [B, H]: what the output layer turns into logits (h_t, or h~_t for LuongDecoder)
  torch::Tensor weights;    ///< [B, S] attention weights of this step
  torch::Tensor positions;  ///< [B] aligned position p_t for local attention, else undefined
  DecoderState state;       ///< the state after this step
};

/// Teacher forcing's result.
struct TeacherForced {
  torch::Tensor features;  ///< [B, T, H]: what the output layer turns into logits
  torch::Tensor weights;   ///< [B, T, S] attention weights; undefined unless asked for
};

/// The vocabulary projection, nn.Linear's `weight` [V, H] and `bias` [V], or with tied embeddings
/// the embedding matrix and a bias of its own (then the state dict holds only `bias`).
class OutputLayerImpl : public torch::nn::Module {
 public:
  OutputLayerImpl(int64_t hidden_size, int64_t vocab_size, torch::nn::Embedding tied_to = nullptr);
  torch::Tensor forward(const torch::Tensor& features) { return torch::nn::functional::linear(features, weight(), bias); }
  const torch::Tensor& weight() const { return tied_ ? tied_->weight : weight_; }
  torch::Tensor bias;

 private:
  torch::Tensor weight_;
  torch::nn::Embedding tied_{nullptr};
};
TORCH_MODULE(OutputLayer);

class DecoderInterface : public torch::nn::Module {
 public:
  /// The encoder's final state [layers, B, H] -> the state before the first step.
  virtual DecoderState initial_state(const RecurrentState& encoder_state) = 0;
  /// previous_word [B] int64, state, memory from attention().prepare, step index t -> one step.
  virtual DecoderStep step(const torch::Tensor& previous_word, const DecoderState& state,
                           const AttentionMemory& memory, int64_t t) = 0;
  /// features [..., H] -> logits [..., V].
  torch::Tensor project(const torch::Tensor& features) { return fc(features); }

  /// Teacher forcing over dec_in [B, T] (<sos> + target, padded with 0) from `state`: every step of
  /// `step`, or a fused kernel where the decoder has one (never when `keep_weights`). The fused kernels
  /// skip each row's steps past its last non-padding token: the features there are zero and take no
  /// gradient (the losses read the target's tokens only).
  virtual TeacherForced teacher_forced(const torch::Tensor& dec_in, const DecoderState& state,
                                       const AttentionMemory& memory, bool keep_weights);
  /// Whether teacher_forced() takes the decoder's fused kernel for tensors on `device`: on the CPU,
  /// for every attention, score and cell at any depth (options.fused).
  bool uses_fused_kernel(const torch::Device& device) const;
  /// Cross-entropy of features [N, H] against targets [N] -> [N], with label smoothing eps (the
  /// target gets 1 - eps, every class eps / V): the vocabulary projection and the loss as one fused
  /// node on the CPU (options.fused), LibTorch's ops elsewhere.
  torch::Tensor token_losses(const torch::Tensor& features, const torch::Tensor& targets, double label_smoothing = 0);

  virtual AttentionImpl& attention() = 0;
  virtual const DecoderOptions& decoder_options() const = 0;
  /// Switches the fused kernels on or off (DecoderOptions::fused).
  virtual void set_fused(bool fused) = 0;

  torch::nn::Embedding embedding{nullptr};
  RecurrentLayers recurrent;
  OutputLayer fc{nullptr};
};

/// Builds the decoder of `kind`.
std::shared_ptr<DecoderInterface> make_decoder(DecoderKind kind, const DecoderOptions& options);

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::DecoderKind> {
  static constexpr std::pair<luong::models::DecoderKind, const char*> values[] = {
      {luong::models::DecoderKind::kLuong, "luong"}, {luong::models::DecoderKind::kBahdanau, "bahdanau"}};
};
