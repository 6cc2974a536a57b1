#pragma once
// local-m (Luong et al. 2015, section 3.2): p_t = t, attention restricted to [p_t - D, p_t + D].
// Unlike the notebook, p_t = min(t, S_i - 1) per example (its real length, not the padded batch
// width), the window honours D, and padding is masked.
#include "luong/models/attention.h"

namespace luong::models {

struct LocalMonotonicAttentionOptions {
  explicit LocalMonotonicAttentionOptions(int64_t hidden_size) : hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, hidden_size);
  /// D, the half-width of the window (window = 2D + 1 positions).
  TORCH_ARG(int64_t, window) = 2;
  TORCH_ARG(ScoreKind, score) = ScoreKind::kDot;
  TORCH_ARG(bool, scale) = true;
  /// The location score's source positions.
  TORCH_ARG(int64_t, positions) = 64;
};

class LocalMonotonicAttentionImpl : public AttentionImpl {
 public:
  explicit LocalMonotonicAttentionImpl(const LocalMonotonicAttentionOptions& options);
  using AttentionImpl::forward;
  /// weights [B, S]: softmax over the window around p_t = min(step, S_i - 1), zero elsewhere.
  AttentionOutput forward(const AttentionMemory& memory, const torch::Tensor& query, int64_t step) override;
  AlignmentScore& score() override { return score_; }

  LocalMonotonicAttentionOptions options;

 private:
  AlignmentScore score_{nullptr};
};
TORCH_MODULE(LocalMonotonicAttention);

}  // namespace luong::models
