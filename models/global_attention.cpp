#include "luong/models/global_attention.h"

namespace luong::models {

GlobalAttentionImpl::GlobalAttentionImpl(const GlobalAttentionOptions& options_) : options(options_) {
  score_ = register_module(
      "score", AlignmentScore(AlignmentScoreOptions(options.hidden_size()).kind(options.score()).scale(options.scale()).positions(options.positions())));
}

AttentionOutput GlobalAttentionImpl::forward(const AttentionMemory& memory, const torch::Tensor& query, int64_t) {
  const torch::Tensor weights = masked_softmax(score_(memory.keys, query), memory.valid);              // [B, S]
  const torch::Tensor context = torch::bmm(weights.unsqueeze(1), memory.encoder_outputs).squeeze(1);  // [B, H]
  return {weights, context, {}};
}

}  // namespace luong::models
