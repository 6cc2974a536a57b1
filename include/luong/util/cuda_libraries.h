#pragma once
// LibTorch's CUDA libraries (libtorch_cuda.so, and through it cuBLAS, cuDNN and NCCL) come with
// luong's CUDA module, libluong_cuda.so, which loads when a command first asks for a GPU. Loading
// them cost every command start-up time, CPU-only ones included (docs/appendix/benchmark-diary.md,
// 2026-12-07, eighth session).
//
// LibTorch looks its CUDA hooks up once: whatever asks for them before libtorch_cuda.so is loaded
// (torch::cuda::device_count(), a seed for every device) fixes them at the stub that knows no GPU,
// for the life of the process. So a command loads the module before anything on the way to a GPU
// asks LibTorch about CUDA: run::parse_device does, first thing for a cuda device.

namespace luong {

/// Loads libluong_cuda.so ($LUONG_CUDA_MODULE, beside the executable, in ../lib or the install
/// directory) unless LibTorch's CUDA library is in the process already (a binary linked with it, as
/// the tests are). Throws luong::Error, saying why, where this build has no CUDA module, where it
/// cannot load, or where LibTorch's CUDA hooks had been looked up before it loaded.
void load_cuda_libraries();

}  // namespace luong
