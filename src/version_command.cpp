#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "luong/cli/commands.h"
#include "luong/cli/option_flags.h"
#include "luong/models/matrix_products.h"
#include "luong/run/runtime.h"
#include "luong/util/cuda_libraries.h"
#include "luong/util/error.h"
#include "luong/util/threads.h"

namespace luong::cli {
namespace {

// The instruction sets this processor reports that matter for LibTorch's kernels.
std::string processor_features() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string flag; words >> flag;) flags.insert(flag);
    break;
  }
  std::string out;
  const auto mark = [&](const char* flag, const char* name) {
    out += std::string(out.empty() ? "" : ", ") + name + (flags.count(flag) ? " yes" : " no");
  };
  mark("avx2", "AVX2");
  mark("avx512f", "AVX-512");
  mark("avx512_bf16", "AVX512-BF16");
  mark("amx_tile", "AMX");
  return out;
}

// Which kernels run the per-step products, float32 and bf16.
std::string panel_kernels() {
  const models::PanelIsa isa = models::panel_isa_here();
  if (isa == models::PanelIsa::kNone) return "as above (no panel kernel for this processor)";
  if (!models::panel_products_enabled()) return "as above (--panel-products off)";
  std::string kernels = isa == models::PanelIsa::kAvx512 ? "panels, AVX-512" : "panels, AVX2";
  const models::Bf16PanelKernel bf16 = models::bf16_panel_kernel();
  if (bf16 != models::Bf16PanelKernel::kNone) {
    kernels += std::string("; in bf16, bf16 panels (") + models::bf16_panel_kernel_name(bf16) +
               (bf16 != models::bf16_panel_kernel_here() ? ", --panel-products no-amx)" : ")");
  }
  return kernels;
}

}  // namespace

int version_command(int argc, char** argv) {
  // The runtime flags select the kernels this reports: `luong --version --panel-products off`.
  cxxopts::Options parser("luong --version", "LibTorch, CUDA, the processor and the kernels luong's commands use.");
  add_flags(parser, run::RuntimeOptions{});
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  run::RuntimeOptions runtime;
  apply_flags(result, runtime);
  run::apply_kernel_switches(runtime);
  configure_threads(static_cast<int>(runtime.threads));  // as every command does
  std::printf("LibTorch %s\n", TORCH_VERSION);
  std::string cuda_failure;
  try {
    load_cuda_libraries();  // what every command with --device cuda does
  } catch (const Error& e) {
    cuda_failure = e.what();
  }
  if (cuda_failure.empty()) {
    const int devices = static_cast<int>(torch::cuda::device_count());
    const long runtime = at::detail::getCUDAHooks().versionCUDART();
    std::printf("CUDA: runtime %ld.%ld (luong's CUDA module loaded); %d device%s visible", runtime / 1000,
                runtime % 1000 / 10, devices, devices == 1 ? "" : "s");
    if (devices > 0) std::printf(", cuDNN %ld", at::globalContext().versionCuDNN());
  } else {
    std::printf("CUDA: not available (%s)", cuda_failure.c_str());
  }
  std::printf("\nCPU: LibTorch's kernels use %s (processor: %s)\n", at::get_cpu_capability().c_str(),
              processor_features().c_str());
  std::printf("threads: %d intra-op (of %d cores this process may use), %d inter-op; %s\n", at::get_num_threads(),
              available_cores(), static_cast<int>(at::get_num_interop_threads()), at::get_parallel_info().find("MKL") != std::string::npos
                                                                      ? "BLAS: MKL, in LibTorch's OpenMP pool"
                                                                      : "BLAS: see at::get_parallel_info()");
  const char* float32 = "MKL";
  switch (models::float32_products()) {
    case models::Float32Products::kMkl: float32 = "MKL (--float32-products mkl)"; break;
    case models::Float32Products::kOneDnn:
      float32 = models::onednn_float32_available()
                    ? "oneDNN (--float32-products onednn)"
                    : "MKL (--float32-products onednn, but LibTorch's oneDNN product needs AVX-512 BW/VL/DQ)";
      break;
    case models::Float32Products::kAuto:
      float32 = models::onednn_float32_is_faster_here()
                    ? "oneDNN from a million multiply-adds, MKL below (auto: AMD with AVX-512)"
                    : "MKL (auto)";
      break;
  }
  std::printf("fused kernels' float32 products: %s\n", float32);
  std::printf("their per-step float32 products: %s\n", panel_kernels().c_str());
  return 0;
}

}  // namespace luong::cli
