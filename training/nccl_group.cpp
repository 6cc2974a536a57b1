// Data-parallel training's NCCL process group, in luong's CUDA module (cuda_module.h).
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "luong/training/cuda_module.h"

namespace luong::training {

c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

}  // namespace luong::training
