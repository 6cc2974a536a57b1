#pragma once
// Luong et al. (2015), section 3.1: the three content-based alignment scores and the
// location-based one.
//   dot:      score(h_t, h_s) = h_t . h_s            (optionally / sqrt(H), the notebook's fix)
//   general:  score(h_t, h_s) = h_t . (W_a h_s)      (optionally / sqrt(H))
//   concat:   score(h_t, h_s) = v_a . tanh(W_a [h_t; h_s])
//   location: score(h_t, s)   = (W_a h_t)_s          (eq. 8: a_t = softmax(W_a h_t), from the target
//             state alone; W_a [P, H] scores P source positions, and positions past P get no weight)
#include <torch/torch.h>

#include <string>

#include "luong/util/options.h"

namespace luong::models {

enum class ScoreKind { kDot, kGeneral, kConcat, kLocation };


struct AlignmentScoreOptions {
  explicit AlignmentScoreOptions(int64_t hidden_size) : hidden_size_(hidden_size) {}
  /// H: size of the decoder query and the encoder states.
  TORCH_ARG(int64_t, hidden_size);
  /// Which score; dot has no parameters.
  TORCH_ARG(ScoreKind, kind) = ScoreKind::kDot;
  /// Divide dot/general scores by sqrt(H) (the notebook scales; the paper does not).
  TORCH_ARG(bool, scale) = true;
  /// location: the source positions W_a scores.
  TORCH_ARG(int64_t, positions) = 64;
};

class AlignmentScoreImpl : public torch::nn::Cloneable<AlignmentScoreImpl> {
 public:
  explicit AlignmentScoreImpl(const AlignmentScoreOptions& options);
  void reset() override;

  /// The query-independent half of the score, computed once per batch.
  /// encoder_outputs [B, S, H] -> keys [B, S, H] (h_s for dot, W_a h_s for general, W_a[:, H:] h_s
  /// for concat).
  torch::Tensor prepare_keys(const torch::Tensor& encoder_outputs);

  /// keys [B, S, H] (from prepare_keys), query h_t [B, H] -> scores [B, S].
  torch::Tensor forward(const torch::Tensor& keys, const torch::Tensor& query);

  AlignmentScoreOptions options;
  torch::nn::Linear Wa{nullptr};  ///< general: [H, H]; concat: [H, 2H] over [h_t; h_s]; location: [P, H]. No bias.
  torch::nn::Linear va{nullptr};  ///< concat only: [1, H], no bias.
};
TORCH_MODULE(AlignmentScore);

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::ScoreKind> {
  static constexpr std::pair<luong::models::ScoreKind, const char*> values[] = {
      {luong::models::ScoreKind::kDot, "dot"},
      {luong::models::ScoreKind::kGeneral, "general"},
      {luong::models::ScoreKind::kConcat, "concat"},
      {luong::models::ScoreKind::kLocation, "location"}};
};
