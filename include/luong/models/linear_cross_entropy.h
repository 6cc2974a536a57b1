#pragma once
// The vocabulary projection and the cross-entropy as one autograd node. Autograd's version makes
// ~6 passes over the [N, V] logits (log_softmax, nll, the zero-filled gradient, log_softmax's
// backward, the bias sum). Here the vocabulary is cut into one slice per intra-op thread: each
// slice's logits, softmax statistics, gradient and products run on its own thread. The forward
// leaves each slice's exponentials in its logits' buffer (nothing more without grad); the backward
// forms the softmax gradient there, the bias's gradient in the same pass, and multiplies. Where the
// backward pass runs with side threads (util/side_tasks.h) and the weight is a leaf, its gradient
// is left to them: nothing later in the backward pass needs it.
#include <torch/torch.h>

namespace luong::models {

/// x [N, H], weight [V, H], bias [V], targets [N] int64 in [0, V) -> cross-entropy of each row
/// [N], the same as cross_entropy(linear(x, weight, bias), targets, reduction none,
/// label_smoothing): with eps > 0 the target distribution is (1 - eps) onehot + eps / V. CPU only.
torch::Tensor linear_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                   const torch::Tensor& targets, double label_smoothing = 0);

}  // namespace luong::models
