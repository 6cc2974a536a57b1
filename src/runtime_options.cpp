#include <torch/torch.h>

#include "luong/cli/options.h"
#include "luong/util/error.h"
#include "luong/util/threads.h"

namespace luong::cli {

void add_runtime_options(cxxopts::Options& options) {
  options.add_options("runtime")
      ("threads", "LibTorch intra-op threads (0 = the cores this process may use); BLAS gets 1",
       cxxopts::value<int>()->default_value("0"))
      ("device", "cpu or cuda[:N]", cxxopts::value<std::string>()->default_value("cpu"));
}

std::string setup_runtime(const cxxopts::ParseResult& result) {
  const int threads = result["threads"].as<int>();
  if (threads < 0) throw Error("--threads must be >= 0");
  configure_threads(threads);
  const std::string device = result["device"].as<std::string>();
  try {
    const torch::Device parsed(device);
    if (parsed.is_cuda() && !torch::cuda::is_available()) {
      throw Error("--device " + device + ": this build or machine has no CUDA device");
    }
  } catch (const c10::Error&) {
    throw Error("--device: unknown device '" + device + "' (expected cpu or cuda[:N])");
  }
  return device;
}

}  // namespace luong::cli
