#pragma once
// The teacher-forced loss of a model over batches: what training's dev evaluation and `luong evaluate`
// both report.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "luong/data_pipeline/batching.h"
#include "luong/models/seq2seq.h"

namespace luong::evaluation {

struct CorpusLoss {
  double sum = 0;           ///< summed cross-entropy over every non-padding target token
  std::int64_t tokens = 0;
  double mean() const { return sum / static_cast<double>(std::max<std::int64_t>(tokens, 1)); }
};

/// Cross-entropy per target token over `batches` (on the CPU; moved to `device` one at a time), in
/// eval mode without gradients; the model's mode is restored after. The sum stays on the device
/// until the end.
CorpusLoss teacher_forced_loss(models::Seq2SeqImpl& model, const std::vector<data::Batch>& batches,
                               const torch::Device& device);

}  // namespace luong::evaluation
