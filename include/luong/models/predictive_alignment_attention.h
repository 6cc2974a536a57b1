#pragma once
// local-p (Luong et al. 2015, section 3.2, eq. 9-10):
//   p_t = (S_i - 1) * sigmoid(v_p . tanh(W_p h_t))         per example, real-valued
//   a_t(s) = align(h_t, h_s) * exp(-(s - p_t)^2 / (2 sigma^2)),  sigma = D / 2
// where align is the softmax over the window [round(p_t) - D, round(p_t) + D] inside the sentence.
// The weights are not renormalised (the paper does not), and p_t stays real-valued so that the
// Gaussian carries gradients into W_p and v_p. Fully vectorised over the batch.
#include "luong/models/attention.h"

namespace luong::models {

struct PredictiveAlignmentAttentionOptions {
  explicit PredictiveAlignmentAttentionOptions(int64_t hidden_size) : hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, hidden_size);
  /// D >= 1: window half-width; sigma = D / 2.
  TORCH_ARG(int64_t, window) = 2;
  TORCH_ARG(ScoreKind, score) = ScoreKind::kDot;
  TORCH_ARG(bool, scale) = true;
  /// The location score's source positions.
  TORCH_ARG(int64_t, positions) = 64;
  /// The notebook's variant: centres clamped to [D, max(D, S_i - 1 - D)] and weights divided by
  /// their sum.
  TORCH_ARG(bool, renormalize) = false;
};

class PredictiveAlignmentAttentionImpl : public AttentionImpl {
 public:
  explicit PredictiveAlignmentAttentionImpl(const PredictiveAlignmentAttentionOptions& options);
  using AttentionImpl::forward;
  /// weights [B, S], context [B, H], positions p_t [B].
  AttentionOutput forward(const AttentionMemory& memory, const torch::Tensor& query, int64_t step) override;
  AlignmentScore& score() override { return score_; }

  PredictiveAlignmentAttentionOptions options;
  torch::nn::Linear position_weights{nullptr};    ///< W_p [H, H] (with bias, as in the notebook)
  torch::nn::Linear position_predictor{nullptr};  ///< v_p [1, H] (with bias, as in the notebook)

 private:
  AlignmentScore score_{nullptr};
};
TORCH_MODULE(PredictiveAlignmentAttention);

}  // namespace luong::models
