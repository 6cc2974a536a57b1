#pragma once
// One optimisation step: forward, backward, the gradient sum across ranks, clipping, the optimizer.
// Nothing in it waits for the device: the loss stays a device tensor, and the gradient norm is
// clipped without reading it back (clip_gradient_norm).
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "luong/data_pipeline/dataset.h"
#include "luong/models/precision.h"
#include "luong/models/seq2seq.h"
#include "luong/run/train_config.h"
#include "luong/training/cuda_graph_step.h"
#include "luong/training/data_parallel.h"
#include "luong/training/fused_adam.h"

namespace luong::training {

/// The gradients' total 2-norm and torch::nn::utils::clip_grad_norm_'s coefficient
/// min(1, max_norm / (norm + 1e-6)), both scalars on the device (nothing is read back).
struct GradientClip {
  torch::Tensor norm, coefficient;
};
GradientClip gradient_clip(const std::vector<torch::Tensor>& parameters, double max_norm);

/// torch::nn::utils::clip_grad_norm_ (the same arithmetic) without its host round trip: scales the
/// gradients by gradient_clip's coefficient and returns the norm before clipping, on the device.
/// With FusedAdam, TrainStep folds the scaling into the optimizer's pass instead (step_scaled).
torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

/// A step reads the training options it needs from the run's own table (run::TrainConfig): the loss
/// (loss_average, label_smoothing), clip, accumulate, precision, and how it runs: cuda_graphs and
/// cuda_graph_padding on a GPU (whole steps as CUDA graphs, cuda_graph_step.h, where they can run:
/// one process, no accumulation, Adam, no deterministic algorithms), overlap_below_hidden on the
/// CPU (fused models of a smaller hidden size run the backward pass on one thread and lend the
/// others to the work it hands out, the output layer's weight gradient behind the recurrences'
/// blocks, util/side_tasks.h; at and above it every piece of work is split over all threads, as a
/// step's inline products then need them; docs/PERFORMANCE.md has where paired runs cross over).
class TrainStep {
 public:
  TrainStep(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer, const run::TrainConfig& options,
            const torch::Device& device, DataParallel* parallel = nullptr);

  struct Result {
    torch::Tensor loss;        ///< the batch's loss as averaged, a float64 scalar on the device
    bool applied = false;      ///< the update was made (the last batch of an accumulation group)
    bool interrupted = false;  ///< some rank asked to stop (only reported where an update was made)
    bool finite = true;        ///< on the CPU: false when the loss was not finite (nothing applied)
  };
  /// Runs forward and backward over `rows` (the whole global batch; each rank takes its shard), and
  /// the update when `accumulate` batches have gathered their gradients or `last` (the epoch's end)
  /// says so. `interrupt` is this process's request to stop, agreed across ranks.
  Result run(const std::vector<const data::EncodedPair*>& rows, bool interrupt, bool last = false);

  /// Whether steps run as CUDA graphs.
  bool uses_cuda_graphs() const { return graphs_ != nullptr; }
  /// Whether the backward pass runs with side threads (overlap_below_hidden): on
  /// the fused kernels only, which hand work out (LibTorch's own operations would run on one
  /// thread: --unfused would run slower). With one intra-op thread there are none, and it runs alone.
  bool overlaps_backward() const { return overlap_ && model_.options.fused(); }

 private:
  Result run_alone(const std::vector<const data::EncodedPair*>& rows, bool interrupt);
  Result run_shard(const std::vector<const data::EncodedPair*>& rows, bool interrupt);
  void apply();

  models::Seq2SeqImpl& model_;
  torch::optim::Optimizer& optimizer_;
  FusedAdam* fused_adam_;  ///< optimizer_ when it is one: clipping then rides in its pass
  run::TrainConfig options_;
  torch::Device device_;
  DataParallel* parallel_;
  /// On a GPU the ranks' stop requests are read back once per this many steps, not every step.
  static constexpr std::int64_t kInterruptVoteInterval = 32;
  std::int64_t steps_ = 0;
  std::int64_t gathered_ = 0;  ///< batches whose gradients wait for the next update
  bool overlap_ = false;       ///< the backward pass runs with side threads (overlap_below_hidden)
  std::unique_ptr<CudaGraphSteps> graphs_;
};

}  // namespace luong::training
