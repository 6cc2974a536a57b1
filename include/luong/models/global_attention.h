#pragma once
// Global attention (Luong et al. 2015, section 3.1): every source position, with the dot, general or
// concat score. With the scaled dot score this is the notebook's DotAttention, plus padding masks.
#include "luong/models/attention.h"

namespace luong::models {

struct GlobalAttentionOptions {
  explicit GlobalAttentionOptions(int64_t hidden_size) : hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(ScoreKind, score) = ScoreKind::kDot;
  /// Scale dot/general by 1/sqrt(H), as the notebook's DotAttention does.
  TORCH_ARG(bool, scale) = true;
  /// The location score's source positions.
  TORCH_ARG(int64_t, positions) = 64;
};

class GlobalAttentionImpl : public AttentionImpl {
 public:
  explicit GlobalAttentionImpl(const GlobalAttentionOptions& options);
  using AttentionImpl::forward;
  /// weights [B, S] = masked softmax of score(h_s, query); context [B, H].
  AttentionOutput forward(const AttentionMemory& memory, const torch::Tensor& query, int64_t step) override;
  AlignmentScore& score() override { return score_; }

  GlobalAttentionOptions options;

 private:
  AlignmentScore score_{nullptr};
};
TORCH_MODULE(GlobalAttention);

}  // namespace luong::models
