#pragma once
// Applying RuntimeOptions: the device a command runs on, its thread pools and determinism.
#include <torch/torch.h>

#include <string>

#include "luong/run/runtime_options.h"

namespace luong::run {

struct Runtime {
  torch::Device device = torch::kCPU;
  int threads = 1;  ///< LibTorch's intra-op threads
};

/// "cpu", "cuda" or "cuda:N" -> the device, checked against what this machine has: throws
/// luong::Error("--device cuda: no CUDA device is visible") and the like.
torch::Device parse_device(const std::string& text);

/// Sets the thread pools (LibTorch's intra-op threads: options.threads, or the cores this process
/// may use shared among `processes` on the machine; inter-op 1; any BLAS's own pool 1), turns on
/// deterministic algorithms when asked, and checks the device. Above the available cores it warns
/// on stderr and goes on.
Runtime apply_runtime(const RuntimeOptions& options, int processes = 1);
/// The CPU kernels' switches of `options` (--float32-products, --panel-products, --no-step-teams),
/// which apply_runtime sets too.
void apply_kernel_switches(const RuntimeOptions& options);

/// The RNG states a checkpoint keeps: the CPU generator's and each visible CUDA device's.
std::vector<std::pair<std::string, torch::Tensor>> random_states();
/// Restores what random_states() saved; a CUDA state for a device this machine lacks is skipped (a
/// checkpoint written on a GPU resumes on the CPU).
void restore_random_states(const std::vector<std::pair<std::string, torch::Tensor>>& states, const std::string& origin);

}  // namespace luong::run
