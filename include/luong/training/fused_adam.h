#pragma once
// torch::optim::Adam with the update of each CPU parameter done in one pass over its elements.
// LibTorch's Adam runs ~7 whole-tensor ops per parameter (mul_, add_, mul_, addcmul_, sqrt, div,
// add_, addcdiv_); at the notebook's size (642,010 floats, most of them in the vocabulary
// projection and the embeddings) that is ~6 ms of memory traffic per step, a third of a training
// step. Same options, the same state tensors (so checkpoints and Adam::load/save are unchanged)
// and the same arithmetic up to floating-point contraction. A step with any parameter that is not a
// dense, contiguous float/double CPU tensor (CUDA, sparse gradients) is Adam's own.
// Gradient clipping's scaling rides in the same pass (step_scaled): at hidden 512 a separate
// scaling pass over the gradients read and wrote 208 MB a step.
#include <torch/torch.h>

#include <optional>
#include <vector>

namespace luong::training {

/// Multiplies every defined gradient of `parameters` in place by `scale`, a scalar tensor on their
/// device (nothing is read back to the host).
void scale_gradients(const std::vector<torch::Tensor>& parameters, const torch::Tensor& scale);

/// The sum of the squares of every defined gradient of `parameters`, in one parallel pass summing in
/// double (chunks of a fixed size, added in order: the same bits on any thread count), where every
/// gradient is a dense, contiguous float/double CPU tensor; nullopt otherwise. LibTorch's norm per
/// gradient is a parallel region each, 66 of them a step at hidden 512 (2.8 ms).
std::optional<double> gradient_squares_sum(const std::vector<torch::Tensor>& parameters);

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(std::vector<torch::Tensor> params, torch::optim::AdamOptions options)
      : torch::optim::Adam(std::move(params), std::move(options)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

  /// Adam's step on every gradient multiplied by `gradient_scale` (a scalar tensor on the
  /// parameters' device, such as gradient clipping's coefficient). Where the step is fused, the
  /// multiplication is part of its one pass and the gradients are left as they were; otherwise they
  /// are scaled in place first, without reading the scale back to the host, and Adam steps.
  void step_scaled(const torch::Tensor& gradient_scale);

 private:
  bool fusable_step() const;
  void fused_step(double gradient_scale);
};

}  // namespace luong::training
