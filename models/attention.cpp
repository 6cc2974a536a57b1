#include "luong/models/attention.h"

#include "luong/models/global_attention.h"
#include "luong/models/local_monotonic_attention.h"
#include "luong/models/predictive_alignment_attention.h"
#include "luong/util/error.h"

namespace luong::models {

AttentionMemory AttentionMemory::index_select(const torch::Tensor& rows) const {
  return {encoder_outputs.index_select(0, rows), keys.index_select(0, rows), valid.index_select(0, rows),
          lengths.index_select(0, rows), positions};
}

torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& valid) {
  // A large finite fill (not -inf) keeps fully masked rows finite; the final fill makes the masked
  // weights exactly zero and stops their gradient.
  const torch::Tensor invalid = valid.logical_not();
  return torch::softmax(scores.masked_fill(invalid, -1e30), 1).masked_fill(invalid, 0.0);
}

AttentionMemory AttentionImpl::prepare(const torch::Tensor& encoder_outputs, const torch::Tensor& src_lengths) {
  TORCH_CHECK(encoder_outputs.dim() == 3, "encoder_outputs must be [B, S, H]");
  const int64_t source_length = encoder_outputs.size(1);
  const auto device = encoder_outputs.device();
  AttentionMemory memory;
  memory.encoder_outputs = encoder_outputs;
  memory.keys = score()->prepare_keys(encoder_outputs);
  memory.lengths = src_lengths.to(device, torch::kLong);
  memory.positions =
      torch::arange(source_length, torch::TensorOptions().dtype(encoder_outputs.scalar_type()).device(device))
          .unsqueeze(0);
  memory.valid = torch::arange(source_length, torch::TensorOptions().dtype(torch::kLong).device(device))
                     .unsqueeze(0)
                     .lt(memory.lengths.unsqueeze(1));
  return memory;
}

AttentionOutput AttentionImpl::forward(const torch::Tensor& encoder_outputs, const torch::Tensor& query,
                                       const torch::Tensor& src_lengths, int64_t step) {
  return forward(prepare(encoder_outputs, src_lengths), query, step);
}

std::shared_ptr<AttentionImpl> make_attention(const AttentionConfig& config, int64_t hidden_size) {
  switch (config.kind) {
    case AttentionKind::kGlobal:
      return std::make_shared<GlobalAttentionImpl>(
          GlobalAttentionOptions(hidden_size).score(config.score).scale(config.scale).positions(config.positions));
    case AttentionKind::kLocalMonotonic:
      if (config.window < 0) throw Error("local-m needs a window D >= 0");
      return std::make_shared<LocalMonotonicAttentionImpl>(LocalMonotonicAttentionOptions(hidden_size)
                                                               .window(config.window)
                                                               .score(config.score)
                                                               .scale(config.scale)
                                                               .positions(config.positions));
    case AttentionKind::kLocalPredictive:
      if (config.window < 1) throw Error("local-p needs a window D >= 1 (sigma = D/2)");
      return std::make_shared<PredictiveAlignmentAttentionImpl>(PredictiveAlignmentAttentionOptions(hidden_size)
                                                                    .window(config.window)
                                                                    .score(config.score)
                                                                    .scale(config.scale)
                                                                    .positions(config.positions)
                                                                    .renormalize(config.renormalize));
  }
  throw Error("unknown attention kind");
}

}  // namespace luong::models
