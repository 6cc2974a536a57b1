#include "luong/training/cuda_module.h"

#include <atomic>

#include "luong/util/cuda_libraries.h"
#include "luong/util/error.h"

namespace luong::training {
namespace {

std::atomic<const CudaModule*> g_module{nullptr};

}  // namespace

void register_cuda_module(const CudaModule& module) { g_module.store(&module); }

const CudaModule& cuda_module() {
  load_cuda_libraries();
  const CudaModule* module = g_module.load();
  if (module == nullptr) {
    throw Error("LibTorch's CUDA libraries are loaded, but luong's CUDA module registered nothing");
  }
  return *module;
}

std::string CudaGraphSteps::unavailable(const torch::Device& device, const torch::optim::Optimizer& optimizer) {
  if (!device.is_cuda()) return "the device is not a GPU";
  if (dynamic_cast<const FusedAdam*>(&optimizer) == nullptr) return "they need Adam";
  if (at::globalContext().deterministicAlgorithms()) return "deterministic algorithms read values back from the GPU";
  return {};
}

std::unique_ptr<CudaGraphSteps> CudaGraphSteps::create(models::Seq2SeqImpl& model, FusedAdam& optimizer,
                                                       const run::TrainConfig& options,
                                                       const torch::Device& device) {
  return cuda_module().graph_steps(model, optimizer, options, device);
}

CudaGraphCounts cuda_graph_counts() {
  const CudaModule* module = g_module.load();  // not loaded: no step ran on a GPU
  return module != nullptr ? module->graph_counts() : CudaGraphCounts{};
}

}  // namespace luong::training
