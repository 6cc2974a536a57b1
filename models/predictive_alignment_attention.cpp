#include "luong/models/predictive_alignment_attention.h"

namespace luong::models {

PredictiveAlignmentAttentionImpl::PredictiveAlignmentAttentionImpl(
    const PredictiveAlignmentAttentionOptions& options_)
    : options(options_) {
  const int64_t h = options.hidden_size();
  position_predictor = register_module("position_predictor", torch::nn::Linear(h, 1));
  position_weights = register_module("position_weights", torch::nn::Linear(h, h));
  score_ = register_module(
      "score", AlignmentScore(AlignmentScoreOptions(h).kind(options.score()).scale(options.scale()).positions(options.positions())));
}

AttentionOutput PredictiveAlignmentAttentionImpl::forward(const AttentionMemory& memory, const torch::Tensor& query,
                                                          int64_t) {
  const int64_t d = options.window();
  const double sigma = static_cast<double>(d) / 2.0;
  const torch::Tensor last = (memory.lengths - 1).to(query.scalar_type());  // S_i - 1, [B]

  // Eq. (9): real-valued p_t inside each sentence; gradients reach W_p and v_p through the Gaussian.
  const torch::Tensor predicted =
      torch::sigmoid(position_predictor(torch::tanh(position_weights(query)))).squeeze(-1) * last;  // [B]
  torch::Tensor centre = predicted.detach().round();
  if (options.renormalize()) {
    const torch::Tensor lower = torch::full_like(centre, static_cast<double>(d));
    const torch::Tensor upper = (last - static_cast<double>(d)).clamp_min(static_cast<double>(d));
    centre = torch::max(torch::min(centre, upper), lower);
  }
  const torch::Tensor in_window =
      memory.valid.logical_and((memory.positions - centre.unsqueeze(1)).abs().le(static_cast<double>(d)));

  const torch::Tensor align = masked_softmax(score_(memory.keys, query), in_window);  // [B, S]
  // Eq. (10): favour positions near p_t.
  const torch::Tensor offset = memory.positions - predicted.unsqueeze(1);
  const torch::Tensor gaussian = torch::exp(-(offset * offset) / (2.0 * sigma * sigma));
  torch::Tensor weights = align * gaussian;
  if (options.renormalize()) weights = weights / weights.sum(1, true).clamp_min(1e-30);
  const torch::Tensor context = torch::bmm(weights.unsqueeze(1), memory.encoder_outputs).squeeze(1);
  return {weights, context, predicted};
}

}  // namespace luong::models
