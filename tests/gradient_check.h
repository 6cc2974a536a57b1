#pragma once
// Central finite differences against autograd, in double precision.
#include <algorithm>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace luong::test {

struct GradientReport {
  std::string name;
  double max_abs_diff = 0;
  double max_rel_diff = 0;  ///< max |autograd - numeric| / (max |numeric| over the tensor + 1e-12)
};

/// `loss` must be a deterministic scalar function of `inputs` (double tensors). Each element is
/// perturbed by +-h and +-2h; the fourth-order central difference
///   f'(x) ~ (-f(x+2h) + 8 f(x+h) - 8 f(x-h) + f(x-2h)) / 12h
/// has truncation error O(h^4) and rounding error O(1e-16/h), both ~1e-12 at h = 1e-3, so a relative
/// tolerance of 1e-6 has room to spare.
inline std::vector<GradientReport> check_gradients(const std::vector<std::pair<std::string, torch::Tensor>>& inputs,
                                                   const std::function<torch::Tensor()>& loss, double h = 1e-3,
                                                   int64_t max_entries = 0) {
  // Thousands of tiny forward passes: one thread. (With two, two such checks that ctest -j2 runs side
  // by side on two cores spent most of their time in the thread pools' spin-waits: 240 s against 12.)
  const int threads_before = torch::get_num_threads();
  torch::set_num_threads(1);
  struct RestoreThreads {
    int count;
    ~RestoreThreads() { torch::set_num_threads(count); }
  } restore{threads_before};
  for (const auto& [name, tensor] : inputs) {
    if (tensor.grad().defined()) tensor.mutable_grad().zero_();
  }
  loss().backward();
  std::vector<GradientReport> reports;
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : inputs) {
    const torch::Tensor analytic = tensor.grad().defined() ? tensor.grad().clone() : torch::zeros_like(tensor);
    torch::Tensor numeric = torch::zeros_like(tensor);
    torch::Tensor flat = tensor.view({-1});
    torch::Tensor numeric_flat = numeric.view({-1});
    // max_entries > 0: an evenly strided sample of each tensor (the unsampled entries stay 0 in both).
    const int64_t stride = max_entries > 0 ? std::max<int64_t>(1, flat.numel() / max_entries) : 1;
    torch::Tensor sampled = torch::zeros_like(flat);
    for (int64_t i = 0; i < flat.numel(); i += stride) {
      sampled[i] = 1;
      const double original = flat[i].item<double>();
      const auto at = [&](double offset) {
        flat[i] = original + offset;
        return loss().item<double>();
      };
      const double value = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h);
      flat[i] = original;
      numeric_flat[i] = value;
    }
    const double abs_diff = ((analytic.view({-1}) * sampled).view_as(numeric) - numeric).abs().max().item<double>();
    const double scale = numeric.abs().max().item<double>() + 1e-12;
    reports.push_back({name, abs_diff, abs_diff / scale});
  }
  return reports;
}

}  // namespace luong::test
