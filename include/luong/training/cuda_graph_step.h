#pragma once
// Whole training steps on a GPU replayed as CUDA graphs. At the sizes people train a recurrent
// model, a step is hundreds of small kernels per decoder step, and LibTorch's host time per launch
// (dispatch, autograd, the allocator) exceeds the kernels' own: the GPU waits for the host
// (docs/appendix/benchmark-diary.md, 2026-12-04). A graph launches a captured step's kernels in one call.
//
// One graph per batch shape: B rows, and the source and target lengths padded up to a multiple of
// `padding` (Seq2SeqImpl::padded_loss: padding changes nothing but the work). Each holds its own
// inputs, into which a batch is copied, and its own memory pool. The step it captures is the
// whole of TrainStep's: the gradients zeroed in place, forward (under the precision's autocast),
// backward into the same gradient tensors, the clipping coefficient, and FusedAdam's device half,
// whose learning rate and step counts live on the device; the host half (FusedAdam's
// prepare_device_step) runs before each replay. The first steps run eagerly (the same step,
// padded alike), so that LibTorch's lazy initialisations happen outside any capture.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "luong/data_pipeline/dataset.h"
#include "luong/models/precision.h"
#include "luong/models/seq2seq.h"
#include "luong/run/train_config.h"
#include "luong/training/fused_adam.h"

namespace luong::training {

/// How many steps each way, over every CudaGraphSteps of the process (what the tests check).
struct CudaGraphCounts {
  std::int64_t eager = 0, captured = 0, replayed = 0;
};
CudaGraphCounts cuda_graph_counts();

class CudaGraphSteps {
 public:
  /// Why graphs cannot run this training, or empty where they can: a device that is not a GPU, an
  /// optimizer other than FusedAdam, deterministic algorithms (the deterministic embedding backward
  /// reads back from the device).
  static std::string unavailable(const torch::Device& device, const torch::optim::Optimizer& optimizer);

  /// The CUDA module's graphs (cuda_module.h), the module loaded first where it is not yet.
  static std::unique_ptr<CudaGraphSteps> create(models::Seq2SeqImpl& model, FusedAdam& optimizer,
                                                const run::TrainConfig& options, const torch::Device& device);

  CudaGraphSteps() = default;
  virtual ~CudaGraphSteps() = default;
  CudaGraphSteps(const CudaGraphSteps&) = delete;
  CudaGraphSteps& operator=(const CudaGraphSteps&) = delete;

  /// One whole step (forward, backward, clipping, Adam) over `rows`; returns the loss as averaged,
  /// a float64 scalar on the device that later steps leave alone. Nothing waits for the device.
  virtual torch::Tensor run(const std::vector<const data::EncodedPair*>& rows) = 0;
};

}  // namespace luong::training
