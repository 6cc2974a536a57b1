// The vocabulary projection and loss (models/linear_cross_entropy.h) at a batch's shape, timed:
// forward, backward, and LibTorch's linear + cross_entropy beside it, on the threads given.
//
//   build/luong_loss_rate [--threads T] [--luong-only] [N H V ...]   (default: the notebook's 206 64 2321)
//
// --luong-only leaves LibTorch's side out (for a profiler to see luong's loss alone).
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "luong/models/linear_cross_entropy.h"
#include "luong/util/threads.h"
#include "timing.h"

namespace {

// Median seconds of `run` over 9 repeats of at least 20 ms each.
double seconds_per_call(const std::function<void()>& run) {
  return luong::bench::median_seconds_per_call(run, 5, 9, 0.02);
}

void measure(int64_t n, int64_t h, int64_t v, bool luong_only) {
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({n, h}).requires_grad_();
  const torch::Tensor weight = (torch::randn({v, h}) * 0.1).requires_grad_();
  const torch::Tensor bias = torch::zeros({v}).requires_grad_();
  const torch::Tensor targets = torch::randint(v, {n});
  const double flop = 2.0 * static_cast<double>(n * h * v);
  const double forward = seconds_per_call([&] {
    torch::NoGradGuard no_grad;
    luong::models::linear_cross_entropy(x, weight, bias, targets);
  });
  const double both = seconds_per_call([&] {
    luong::models::linear_cross_entropy(x, weight, bias, targets).sum().backward();
  });
  if (luong_only) {
    std::printf("[%5lld, %4lld] x [%4lld, %6lld]  forward %8.1f us (%6.1f GFLOP/s)  forward+backward %8.1f us (%6.1f GFLOP/s)\n",
                static_cast<long long>(n), static_cast<long long>(h), static_cast<long long>(h), static_cast<long long>(v),
                forward * 1e6, flop / forward * 1e-9, both * 1e6, 3 * flop / both * 1e-9);
    return;
  }
  const double library = seconds_per_call([&] {
    torch::nn::functional::cross_entropy(
        torch::linear(x, weight, bias), targets,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
        .sum()
        .backward();
  });
  std::printf("[%5lld, %4lld] x [%4lld, %6lld]  forward %8.1f us (%6.1f GFLOP/s)  forward+backward %8.1f us (%6.1f GFLOP/s)  "
              "LibTorch %8.1f us  speed-up %.2fx\n",
              static_cast<long long>(n), static_cast<long long>(h), static_cast<long long>(h), static_cast<long long>(v),
              forward * 1e6, flop / forward * 1e-9, both * 1e6, 3 * flop / both * 1e-9, library * 1e6, library / both);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  bool luong_only = false;
  std::vector<int64_t> dims;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--luong-only") == 0) {
      luong_only = true;
    } else {
      dims.push_back(std::atoll(argv[i]));
    }
  }
  if (dims.empty()) dims = {206, 64, 2321};
  if (dims.size() % 3 != 0 || threads < 1) {
    std::fprintf(stderr, "usage: luong_loss_rate [--threads T] [--luong-only] [N H V ...]\n");
    return 2;
  }
  luong::configure_threads(threads);  // LibTorch's threads, BLAS's and the allocator, as luong's commands set them
  std::printf("%d threads\n", threads);
  for (std::size_t i = 0; i < dims.size(); i += 3) measure(dims[i], dims[i + 1], dims[i + 2], luong_only);
  return 0;
}
