#pragma once
// Encoder + attention decoder, as the notebook trains them, with a masked token-level loss.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "luong/data_pipeline/batching.h"
#include "luong/models/decoder_interface.h"
#include "luong/models/encoder.h"

namespace luong::models {

struct Seq2SeqOptions {
  Seq2SeqOptions(int64_t source_vocab_size, int64_t target_vocab_size)
      : source_vocab_size_(source_vocab_size), target_vocab_size_(target_vocab_size) {}
  TORCH_ARG(int64_t, source_vocab_size);
  TORCH_ARG(int64_t, target_vocab_size);
  /// Decoder embedding size (the notebook: 28); the encoder embeds at hidden_size.
  TORCH_ARG(int64_t, embed_size) = 28;
  TORCH_ARG(int64_t, hidden_size) = 64;
  TORCH_ARG(CellKind, cell) = CellKind::kGru;
  /// Recurrent layers of the encoder and of the decoder.
  TORCH_ARG(int64_t, layers) = 1;
  /// Dropout as the paper applies it: embeddings, between layers, encoder outputs, the decoder's
  /// output features (training only).
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(bool, bidirectional) = false;
  /// The decoder's output projection reuses its embedding matrix (embed_size == hidden_size).
  TORCH_ARG(bool, tie_embeddings) = false;
  TORCH_ARG(DecoderKind, decoder) = DecoderKind::kLuong;
  TORCH_ARG(AttentionConfig, attention) = AttentionConfig{};
  /// Let the encoder and decoder use their hand-differentiated CPU kernels where the architecture
  /// allows (EncoderOptions::fused, DecoderOptions::fused): the same function, faster
  /// (docs/PERFORMANCE.md). Each module makes the choice itself, per device.
  TORCH_ARG(bool, fused) = true;
};

/// The encoder's result in the form every decoding loop starts from.
struct EncodedSource {
  AttentionMemory memory;
  DecoderState state;
};

struct Seq2SeqOutput {
  torch::Tensor logits;     ///< [B, T, V]
  torch::Tensor attention;  ///< [B, T, S]
};

/// How the cross-entropy of a batch is averaged.
enum class LossAverage {
  kToken,  ///< over all non-padding target tokens (every token weighs the same)
  kStep,   ///< the notebook's: per decoder step over its non-padding tokens, then over steps
};

struct LossOptions {
  LossOptions(LossAverage average_ = LossAverage::kToken, double label_smoothing_ = 0.0)  // NOLINT: implicit
      : average(average_), label_smoothing(label_smoothing_) {}
  LossAverage average;
  /// Label smoothing eps: the target's probability mass 1 - eps, eps spread over the vocabulary.
  double label_smoothing;
};

/// Each decoder step's weight under `average`, given the real target tokens at each step
/// (tokens_at_step [T]): 1 / all tokens (kToken), 1 / (tokens at the step x T) (kStep). Cross-entropy
/// times its step's weight, summed over the tokens, is the average. A data-parallel rank weighs its
/// rows with the whole global batch's counts.
std::vector<double> step_weights(const std::vector<int64_t>& tokens_at_step, LossAverage average);

struct LossOutput {
  torch::Tensor loss;       ///< scalar: cross-entropy averaged over non-padding target tokens
  torch::Tensor sum;        ///< scalar: summed cross-entropy
  int64_t tokens = 0;       ///< non-padding target tokens
};

class Seq2SeqImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqImpl(const Seq2SeqOptions& options);

  /// src [B, S], src_lengths [B] -> attention memory and the decoder's initial state.
  EncodedSource encode(const torch::Tensor& src, const torch::Tensor& src_lengths);

  /// src [B, S], src_lengths [B], dec_in [B, T] -> logits [B, T, V], attention [B, T, S] (the step
  /// path, since it keeps the attention weights).
  Seq2SeqOutput forward(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& dec_in);

  /// Cross-entropy over the non-padding entries of dec_tgt [B, T]; the vocabulary projection runs
  /// only on those positions. (Reads the entries' positions back from dec_tgt's device.)
  LossOutput loss(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& dec_in,
                  const torch::Tensor& dec_tgt, const LossOptions& options = {});
  /// loss() of a batch, whose target rows and counts, made on the host, spare the device a round trip.
  LossOutput loss(const data::Batch& batch, const LossOptions& options = {});

  /// As loss(), but `loss` is the sum over non-padding entries of dec_tgt [B, T] of cross-entropy
  /// times step_weights[t] (step_weights [T'] with T' >= T: the function step_weights() of the whole
  /// global batch, where a data-parallel rank holds a share of it).
  LossOutput weighted_loss(const data::Batch& batch, const std::vector<double>& step_weights,
                           double label_smoothing = 0);

  /// loss()'s `loss` and `sum` computed over every position of dec_tgt, padding weighted zero: its
  /// shapes are the tensors' shapes alone (no index of the real tokens, nothing read back), so that
  /// a CUDA graph can hold it, and padding rows or steps beyond the batch's own change nothing.
  /// `tokens` is left 0 (counting them is the host's business). src_lengths on src's device.
  LossOutput padded_loss(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& dec_in,
                         const torch::Tensor& dec_tgt, const LossOptions& options = {});

  /// Switches every module's fused kernels on or off (Seq2SeqOptions::fused).
  void set_fused(bool fused);
  /// Redraws every parameter from U(-range, range) (OpenNMT-py's param_init), from LibTorch's global
  /// generator; the embeddings' padding rows stay zero, as at construction.
  void initialize_uniform(double range);

  Seq2SeqOptions options;
  Encoder encoder{nullptr};
  std::shared_ptr<DecoderInterface> decoder;

 private:
  struct TokenLosses {
    torch::Tensor per_token;  ///< [N] cross-entropy of each non-padding target entry
    torch::Tensor rows;       ///< [N] its flat index b * T + t into dec_tgt
  };
  /// rows: the flat indices of dec_tgt's non-padding entries.
  TokenLosses token_losses(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& dec_in,
                           const torch::Tensor& dec_tgt, const torch::Tensor& rows, double label_smoothing);
  /// tokens_at_step: [T], the real tokens at each of dec_tgt's steps.
  LossOutput average_loss(const TokenLosses& losses, const std::vector<int64_t>& tokens_at_step,
                          LossAverage average) const;
};
TORCH_MODULE(Seq2Seq);

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::LossAverage> {
  static constexpr std::pair<luong::models::LossAverage, const char*> values[] = {
      {luong::models::LossAverage::kToken, "token"}, {luong::models::LossAverage::kStep, "step"}};
};
