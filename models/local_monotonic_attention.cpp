#include "luong/models/local_monotonic_attention.h"

namespace luong::models {

LocalMonotonicAttentionImpl::LocalMonotonicAttentionImpl(const LocalMonotonicAttentionOptions& options_)
    : options(options_) {
  score_ = register_module(
      "score", AlignmentScore(AlignmentScoreOptions(options.hidden_size()).kind(options.score()).scale(options.scale()).positions(options.positions())));
}

AttentionOutput LocalMonotonicAttentionImpl::forward(const AttentionMemory& memory, const torch::Tensor& query,
                                                     int64_t step) {
  // p_t = min(t, S_i - 1): monotonic alignment that stops at each sentence's own last token.
  const torch::Tensor aligned = (memory.lengths - 1).clamp_max(step);                                // [B]
  const torch::Tensor distance = (memory.positions.to(torch::kLong) - aligned.unsqueeze(1)).abs();  // [B, S]
  const torch::Tensor in_window = memory.valid.logical_and(distance.le(options.window()));
  const torch::Tensor weights = masked_softmax(score_(memory.keys, query), in_window);
  const torch::Tensor context = torch::bmm(weights.unsqueeze(1), memory.encoder_outputs).squeeze(1);
  return {weights, context, aligned.to(query.scalar_type())};
}

}  // namespace luong::models
