#pragma once
// torch::optim::Adam with the update of each CPU parameter done in one pass over its elements.
// LibTorch's Adam runs ~7 whole-tensor ops per parameter (mul_, add_, mul_, addcmul_, sqrt, div,
// add_, addcdiv_); at the notebook's size (642,010 floats, most of them in the vocabulary
// projection and the embeddings) that is ~6 ms of memory traffic per step, a third of a training
// step. Same options, the same state tensors (so checkpoints and Adam::load/save are unchanged)
// and the same arithmetic up to floating-point contraction. A step with any parameter that is not a
// dense, contiguous float/double CPU tensor (CUDA, sparse gradients) is Adam's own.
#include <torch/torch.h>

#include <vector>

namespace luong::training {

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(std::vector<torch::Tensor> params, torch::optim::AdamOptions options)
      : torch::optim::Adam(std::move(params), std::move(options)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace luong::training
