// libluong_cuda.so's table, registered as the module loads (or as a binary linked with its code starts).
#include "luong/training/cuda_module.h"

namespace luong::training {
namespace {

const CudaModule kModule{make_cuda_graph_steps, count_cuda_graph_steps, make_nccl_group};

const bool kRegistered = (register_cuda_module(kModule), true);

}  // namespace
}  // namespace luong::training
