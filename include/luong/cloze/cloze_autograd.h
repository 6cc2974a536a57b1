#pragma once
// The same cloze head written with LibTorch autograd, to prove the hand-written backward equal to it.
#include <torch/torch.h>

#include <vector>

#include "luong/cloze/cloze_head.h"

namespace luong::cloze {

class ClozeAutogradImpl : public torch::nn::Module {
 public:
  /// Copies `params` into double-precision parameters E [vocab,d], W_Q, W_K, W_V, W_O.
  explicit ClozeAutogradImpl(const ClozeParameters& params);

  /// idx: token ids of one sentence -> loss summed over its positions (scalar). The loss is
  /// -log_softmax at each target, whose gradient is exactly P - onehot (the seed's +1e-12 only
  /// shifts the reported value).
  torch::Tensor forward(const std::vector<int>& idx);

  torch::Tensor E, W_Q, W_K, W_V, W_O;
};
TORCH_MODULE(ClozeAutograd);

struct GradientDifference {
  const char* name;
  double max_abs = 0;
  double max_rel = 0;  ///< max |manual - autograd| / max |autograd| over the tensor
};

/// Gradients of one sentence by hand (with `kernels`) and by autograd, compared per parameter.
std::vector<GradientDifference> compare_gradients(ClozeKernels kernels, const ClozeParameters& params,
                                                  const std::vector<int>& idx);

}  // namespace luong::cloze
