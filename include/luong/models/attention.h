#pragma once
// The attention interface shared by global, local-m and local-p attention, and its configuration.
#include <torch/torch.h>

#include <memory>
#include <string>

#include "luong/models/alignment_score.h"

namespace luong::models {

enum class AttentionKind { kGlobal, kLocalMonotonic, kLocalPredictive };


/// Everything that selects and sizes an attention module (what config.json records).
struct AttentionConfig {
  AttentionKind kind = AttentionKind::kGlobal;
  ScoreKind score = ScoreKind::kDot;
  /// Scale dot/general scores by 1/sqrt(H).
  bool scale = true;
  /// D: local windows cover [p_t - D, p_t + D].
  int64_t window = 2;
  /// local-p only: the notebook's variant (window centre clamped into the sentence, weights
  /// renormalised to sum to 1). The paper does neither.
  bool renormalize = false;
  /// The location score's source positions (W_a's rows).
  int64_t positions = 64;
};

/// What attention needs of the encoder, computed once per batch and reused at every decoder step.
struct AttentionMemory {
  torch::Tensor encoder_outputs;  ///< [B, S, H]
  torch::Tensor keys;             ///< [B, S, H], the score's query-independent part
  torch::Tensor valid;            ///< [B, S] bool, true on real (non-padding) source positions
  torch::Tensor lengths;          ///< [B] int64 on the model's device
  torch::Tensor positions;        ///< [1, S] source positions 0..S-1 in the model's dtype

  /// The memory for a subset / reordering of the batch (beam search).
  AttentionMemory index_select(const torch::Tensor& rows) const;
};

struct AttentionOutput {
  torch::Tensor weights;    ///< [B, S], exactly 0 on padding and outside local windows
  torch::Tensor context;    ///< [B, H] = sum_s weights[b, s] * h_s
  torch::Tensor positions;  ///< [B] aligned position p_t (local attention), undefined for global
};

/// Softmax over the positions where `valid` is true; other positions get exactly 0, and a row with
/// no valid position is all zeros (never NaN). scores [B, S], valid [B, S] bool -> [B, S].
torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& valid);

/// Interface of every attention module. Not Cloneable: the decoder owns one instance.
class AttentionImpl : public torch::nn::Module {
 public:
  /// encoder_outputs [B, S, H], src_lengths [B] (any device) -> memory for forward().
  virtual AttentionMemory prepare(const torch::Tensor& encoder_outputs, const torch::Tensor& src_lengths);

  /// memory from prepare(), query h [B, H], decoder step t (0-based) -> weights [B, S], context [B, H].
  virtual AttentionOutput forward(const AttentionMemory& memory, const torch::Tensor& query, int64_t step) = 0;

  /// Convenience: prepare + forward for one step.
  AttentionOutput forward(const torch::Tensor& encoder_outputs, const torch::Tensor& query,
                          const torch::Tensor& src_lengths, int64_t step = 0);

  virtual AlignmentScore& score() = 0;
};

/// Builds the attention module that `config` describes for hidden size H.
std::shared_ptr<AttentionImpl> make_attention(const AttentionConfig& config, int64_t hidden_size);

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::AttentionKind> {
  static constexpr std::pair<luong::models::AttentionKind, const char*> values[] = {
      {luong::models::AttentionKind::kGlobal, "global"},
      {luong::models::AttentionKind::kLocalMonotonic, "local-m"},
      {luong::models::AttentionKind::kLocalPredictive, "local-p"}};
};
