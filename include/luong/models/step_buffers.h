#pragma once
// Addressing the fused kernels' per-step buffers ([steps, B, width], contiguous) without the
// dispatcher's select and narrow, and running a recurrence's batch rows on the intra-op threads.
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>

namespace luong::models {

/// Row t of a tensor's first dimension.
template <typename T>
T* step_ptr(const torch::Tensor& tensor, int64_t t) {
  return tensor.data_ptr<T>() + t * tensor.stride(0);
}

/// Rows [first, first + count) of step t of a [steps, B, width] buffer (or of a [steps * B, width]
/// one), as a tensor for the matrix products.
inline torch::Tensor step_rows(const torch::Tensor& buffer, int64_t t, int64_t batch, int64_t first, int64_t count) {
  const int64_t width = buffer.size(buffer.dim() - 1);
  auto* base = static_cast<char*>(buffer.data_ptr()) + (t * batch + first) * width * buffer.element_size();
  return torch::from_blob(base, {count, width}, buffer.options());
}

/// Runs body(first, count) over contiguous blocks of batch rows, one block per intra-op thread. The
/// rows of a recurrence are independent, so each thread runs the whole time loop for its rows with
/// no synchronisation per step. The tensors a body touches must not require grad (the worker
/// threads' grad mode is their own), hence the kernels' detached weights.
template <typename Body>
void for_row_blocks(int64_t batch, const Body& body) {
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), batch / 8));
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t first = batch * k / blocks;
      body(first, batch * (k + 1) / blocks - first);
    }
  });
}

}  // namespace luong::models
