#include "luong/cloze/cloze_autograd.h"

#include <cmath>

namespace luong::cloze {
namespace {
torch::Tensor from_slice(const ClozeParameters& params, int which) {
  const auto s = params.slice(which);
  return torch::from_blob(const_cast<double*>(params.data.data() + s.offset), {s.rows, s.cols}, torch::kDouble).clone();
}
}  // namespace

ClozeAutogradImpl::ClozeAutogradImpl(const ClozeParameters& params) {
  E = register_parameter("E", from_slice(params, 0));
  W_Q = register_parameter("W_Q", from_slice(params, 1));
  W_K = register_parameter("W_K", from_slice(params, 2));
  W_V = register_parameter("W_V", from_slice(params, 3));
  W_O = register_parameter("W_O", from_slice(params, 4));
}

torch::Tensor ClozeAutogradImpl::forward(const std::vector<int>& idx) {
  const auto n = static_cast<int64_t>(idx.size());
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>(idx.begin(), idx.end()), torch::kLong);
  const torch::Tensor X = E.index_select(0, ids);
  const torch::Tensor Q = X.matmul(W_Q), K = X.matmul(W_K), V = X.matmul(W_V);
  const torch::Tensor mask = torch::eye(n, torch::TensorOptions().dtype(torch::kBool));
  const torch::Tensor S = (Q.matmul(K.t()) / std::sqrt(static_cast<double>(W_K.size(1)))).masked_fill(mask, -1e9);
  const torch::Tensor A = torch::softmax(S, 1);
  const torch::Tensor scores = A.matmul(V).matmul(W_O);
  return -torch::log_softmax(scores, 1).gather(1, ids.unsqueeze(1)).sum();
}

std::vector<GradientDifference> compare_gradients(ClozeKernels kernels, const ClozeParameters& params,
                                                  const std::vector<int>& idx) {
  ClozeParameters grads(params.dims);
  cloze_forward_backward(kernels, params, idx.data(), static_cast<int>(idx.size()), grads);

  ClozeAutograd model(params);
  model->forward(idx).backward();
  const torch::Tensor autograd[5] = {model->E.grad(), model->W_Q.grad(), model->W_K.grad(), model->W_V.grad(),
                                     model->W_O.grad()};
  std::vector<GradientDifference> out;
  for (int which = 0; which < 5; ++which) {
    const torch::Tensor manual = from_slice(grads, which);
    const double max_abs = (manual - autograd[which]).abs().max().item<double>();
    const double scale = autograd[which].abs().max().item<double>();
    out.push_back({ClozeParameters::kNames[which], max_abs, scale > 0 ? max_abs / scale : max_abs});
  }
  return out;
}

}  // namespace luong::cloze
