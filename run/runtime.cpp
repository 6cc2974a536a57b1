#include "luong/run/runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <cstdio>
#include <cstdlib>

#include "luong/util/cuda_libraries.h"
#include "luong/util/error.h"
#include "luong/util/threads.h"

namespace luong::run {

torch::Device parse_device(const std::string& text) {
  std::optional<torch::Device> device;
  try {
    device.emplace(text);
  } catch (const c10::Error&) {
    throw Error("--device: unknown device '" + printable(text) + "' (expected cpu, cuda or cuda:N)");
  }
  if (!device->is_cpu() && !device->is_cuda()) {
    throw Error("--device: unknown device '" + printable(text) + "' (expected cpu, cuda or cuda:N)");
  }
  if (device->is_cuda()) {
    try {
      load_cuda_libraries();
    } catch (const Error& e) {
      throw Error("--device " + printable(text) + ": " + e.what());
    }
    const auto count = static_cast<int>(torch::cuda::device_count());
    if (count == 0) throw Error("--device " + printable(text) + ": no CUDA device is visible");
    if (device->has_index() && device->index() >= count) {
      throw Error("--device " + printable(text) + ": only " + std::to_string(count) + " CUDA device" +
                  (count == 1 ? " is" : "s are") + " visible");
    }
  }
  return *device;
}

Runtime apply_runtime(const RuntimeOptions& options, int processes) {
  Runtime runtime;
  const int cores = available_cores();
  if (options.threads > cores) {
    std::fprintf(stderr, "luong: warning: --threads %lld is more than the %d core%s this process may use\n",
                 static_cast<long long>(options.threads), cores, cores == 1 ? "" : "s");
  }
  const int threads = options.threads > 0 ? static_cast<int>(options.threads) : std::max(1, cores / std::max(processes, 1));
  if (options.deterministic) {
    // cuBLAS reads this when it creates its first handle, which has not happened yet.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  runtime.device = parse_device(options.device);
  runtime.threads = configure_threads(threads);
  apply_kernel_switches(options);
  return runtime;
}

void apply_kernel_switches(const RuntimeOptions& options) {
  models::set_float32_products(options.float32_products);
  models::set_panel_products(options.panel_products);
  models::set_step_teams_enabled(options.step_teams);
}

std::vector<std::pair<std::string, torch::Tensor>> random_states() {
  std::vector<std::pair<std::string, torch::Tensor>> states = {
      {"cpu", at::detail::getDefaultCPUGenerator().get_state()}};
  const auto count = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < count; ++i) {
    const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
    at::Generator generator = at::globalContext().defaultGenerator(device);  // shares the generator
    states.emplace_back("cuda:" + std::to_string(i), generator.get_state());
  }
  return states;
}

void restore_random_states(const std::vector<std::pair<std::string, torch::Tensor>>& states, const std::string& origin) {
  const auto count = static_cast<int>(torch::cuda::device_count());
  bool cpu = false;
  for (const auto& [name, state] : states) {
    if (state.scalar_type() != torch::kByte || state.dim() != 1) {
      throw CheckpointError(origin + ": random state '" + printable(name) + "' is not a byte vector");
    }
    try {
      if (name == "cpu") {
        at::Generator generator = at::detail::getDefaultCPUGenerator();
        generator.set_state(state);
        cpu = true;
      } else if (name.rfind("cuda:", 0) == 0) {
        const int index = std::atoi(name.c_str() + 5);
        if (index < 0 || index >= count) continue;
        const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
        at::Generator generator = at::globalContext().defaultGenerator(device);  // shares the generator
        generator.set_state(state);
      } else {
        throw CheckpointError(origin + ": unknown random state '" + printable(name) + "'");
      }
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      throw CheckpointError(origin + ": random state '" + printable(name) + "' is invalid (" +
                            printable(what.substr(0, what.find('\n'))) + ")");
    }
  }
  if (!cpu) throw CheckpointError(origin + ": no CPU random state");
}

}  // namespace luong::run
