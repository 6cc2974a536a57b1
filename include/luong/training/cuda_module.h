#pragma once
// luong's CUDA module, libluong_cuda.so: the code that calls LibTorch's CUDA API (CUDA graphs,
// streams and events; NCCL). It lives apart so that CPU-only commands never load LibTorch's CUDA
// libraries (util/cuda_libraries.h). The rest of luong reaches it through this table, which the
// module registers as it loads; a binary linked with the module's code (the tests) has the table
// from the start.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>

#include <chrono>
#include <memory>

#include "luong/training/cuda_graph_step.h"

namespace luong::training {

struct CudaModule {
  std::unique_ptr<CudaGraphSteps> (*graph_steps)(models::Seq2SeqImpl& model, FusedAdam& optimizer,
                                                 const run::TrainConfig& options, const torch::Device& device);
  CudaGraphCounts (*graph_counts)();
  /// A process group of `size` ranks over NCCL, meeting through `store`.
  c10::intrusive_ptr<c10d::Backend> (*nccl_group)(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout);
};

/// Called by the module as it loads (training/cuda_module_entry.cpp).
void register_cuda_module(const CudaModule& module);

/// The module's table, the module loaded first where it is not yet. Throws luong::Error where this
/// build has none or it cannot load.
const CudaModule& cuda_module();

// The module's own functions: defined in libluong_cuda.so only, so everything else calls them
// through the table (the commands module links with --no-undefined, which holds it to that).
std::unique_ptr<CudaGraphSteps> make_cuda_graph_steps(models::Seq2SeqImpl& model, FusedAdam& optimizer,
                                                      const run::TrainConfig& options, const torch::Device& device);
CudaGraphCounts count_cuda_graph_steps();
c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout);

}  // namespace luong::training
