#pragma once
// Addressing the fused kernels' per-step buffers ([steps, B, width], contiguous) without the
// dispatcher's select and narrow, and running a recurrence's batch rows on the intra-op threads.
#include <torch/torch.h>

#include <ATen/Config.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "luong/util/side_tasks.h"

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

/// How many contiguous blocks of rows PackedRows splits a batch into: one per intra-op thread, of at
/// least 8 rows. The rows of a recurrence are independent, so each thread runs the whole time loop for
/// its rows with no synchronisation per step. With `lanes` independent recurrences over the same rows
/// (a bidirectional layer's two directions), the threads are shared among the lanes: each lane's
/// blocks are that much larger.
inline int64_t row_block_count(int64_t batch, int64_t lanes = 1) {
  return std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads() / lanes, batch / 8));
}

/// A padded batch of sequences reordered for a recurrence that computes only real tokens. The rows are
/// dealt, longest first, over row_block_count's blocks, so that within every block they run longest
/// first: at time t the rows still inside their sequences (t < length) are a prefix of each block, and
/// a step's products and gates run on that prefix alone (padding is a large share of a batch of
/// random sentences). The real tokens are also numbered in (time, block, row) order, the layout in which a
/// layer's input projection is one product over real tokens only: block k's active rows at time t are
/// tokens [offset(t, k), offset(t, k) + active(t, k)).
class PackedRows {
 public:
  /// lengths [B] int64 on the CPU, each in [0, steps]; `blocks`: row_block_count(B), or the forward
  /// pass's count where a backward pass rebuilds the layout its buffers were written in.
  PackedRows(const torch::Tensor& lengths, int64_t steps, int64_t blocks = 0)
      : batch_(lengths.size(0)), steps_(steps), blocks_(blocks > 0 ? blocks : row_block_count(batch_)) {
    const auto* len = lengths.data_ptr<int64_t>();
    std::vector<int64_t> by_length(static_cast<std::size_t>(batch_));
    for (int64_t b = 0; b < batch_; ++b) by_length[static_cast<std::size_t>(b)] = b;
    std::stable_sort(by_length.begin(), by_length.end(), [&](int64_t a, int64_t b) { return len[a] > len[b]; });
    std::vector<int64_t> filled(static_cast<std::size_t>(blocks_), 0);
    order_ = torch::empty({batch_}, torch::kLong);
    restore_ = torch::empty({batch_}, torch::kLong);
    kernel_lengths_.resize(static_cast<std::size_t>(batch_));
    int64_t k = 0;
    for (const int64_t b : by_length) {
      while (filled[static_cast<std::size_t>(k)] == rows(k)) k = (k + 1) % blocks_;
      const int64_t row = first(k) + filled[static_cast<std::size_t>(k)]++;
      order_.data_ptr<int64_t>()[row] = b;
      restore_.data_ptr<int64_t>()[b] = row;
      kernel_lengths_[static_cast<std::size_t>(row)] = len[b];
      k = (k + 1) % blocks_;
    }
    active_.assign(static_cast<std::size_t>(steps_ * blocks_), 0);
    offset_.assign(static_cast<std::size_t>(steps_ * blocks_), 0);
    std::vector<int64_t> token_index;
    for (int64_t t = 0; t < steps_; ++t) {
      for (int64_t block = 0; block < blocks_; ++block) {
        const std::size_t at = static_cast<std::size_t>(t * blocks_ + block);
        offset_[at] = static_cast<int64_t>(token_index.size());
        for (int64_t row = first(block); row < first(block) + rows(block) && kernel_length(row) > t; ++row) {
          token_index.push_back(t * batch_ + row);
        }
        active_[at] = static_cast<int64_t>(token_index.size()) - offset_[at];
      }
    }
    tokens_ = torch::tensor(token_index, torch::kLong);
  }

  int64_t blocks() const { return blocks_; }
  int64_t first(int64_t block) const { return batch_ * block / blocks_; }
  int64_t rows(int64_t block) const { return batch_ * (block + 1) / blocks_ - first(block); }
  /// The rows of `block` inside their sequences at time t: the block's first active(t, block) rows.
  int64_t active(int64_t t, int64_t block) const { return active_[static_cast<std::size_t>(t * blocks_ + block)]; }
  /// Where block `block`'s active rows at time t start among the real tokens.
  int64_t offset(int64_t t, int64_t block) const { return offset_[static_cast<std::size_t>(t * blocks_ + block)]; }
  int64_t kernel_length(int64_t row) const { return kernel_lengths_[static_cast<std::size_t>(row)]; }
  /// [N] int64: real token p is row t * B + j of a [steps, B, ...] buffer in the kernel's row order.
  const torch::Tensor& tokens() const { return tokens_; }
  /// The real tokens' rows of a [steps, B, ...] buffer in the kernel's row order, packed: [N, ...].
  torch::Tensor real(const torch::Tensor& buffer) const {
    return buffer.reshape({steps_ * batch_, -1}).index_select(0, tokens_);
  }
  /// The real tokens' rows [N, K] back in a [steps, B, K] buffer, zero at the padding.
  torch::Tensor unpacked(const torch::Tensor& rows) const {
    return torch::zeros({steps_ * batch_, rows.size(1)}, rows.options()).index_copy_(0, tokens_, rows).view(
        {steps_, batch_, rows.size(1)});
  }
  /// A caller's tensor (batch rows along `dim`) in the kernel's row order, and back.
  torch::Tensor to_kernel(const torch::Tensor& t, int64_t dim = 0) const { return t.index_select(dim, order_); }
  torch::Tensor to_caller(const torch::Tensor& t, int64_t dim = 0) const { return t.index_select(dim, restore_); }

  /// body(block, first, rows) for every block, one per intra-op thread (run_tasks). The kernels'
  /// bodies touch detached tensors only: the blocks compute beside the autograd graph.
  template <typename Body>
  void for_blocks(const Body& body) const {
    for_blocks_side_by_side([&](int64_t block, int64_t first, int64_t rows, bool) { body(block, first, rows); });
  }
  /// for_blocks, telling each body whether the blocks run side by side: two blocks, each on its own
  /// thread of an OpenMP team (whose threads all run at once), so that they may meet at every step
  /// (StepTeam). A pool's tasks may run one after another: never side by side.
  template <typename Body>
  void for_blocks_side_by_side(const Body& body) const {
    if (side_tasks_active()) {  // the side threads may be busy with deferred work: never side by side
      run_tasks(blocks_, [&](int64_t k) { body(k, first(k), rows(k), false); });
      return;
    }
    at::parallel_for(0, blocks_, 1, [&](int64_t begin, int64_t end) {
#if AT_PARALLEL_OPENMP
      const bool side_by_side = blocks_ == 2 && end - begin == 1;
#else
      const bool side_by_side = false;
#endif
      for (int64_t k = begin; k < end; ++k) body(k, first(k), rows(k), side_by_side);
    });
  }
  /// body(lane, block, first, rows) for every block of each of `lanes` independent recurrences over
  /// these rows, the lanes x blocks tasks shared over the intra-op threads.
  template <typename Body>
  void for_lane_blocks(int64_t lanes, const Body& body) const {
    run_tasks(lanes * blocks_, [&](int64_t task) {
      const int64_t k = task % blocks_;
      body(task / blocks_, k, first(k), rows(k));
    });
  }

 private:
  int64_t batch_, steps_, blocks_;
  torch::Tensor order_, restore_, tokens_;
  std::vector<int64_t> kernel_lengths_, active_, offset_;
};

}  // namespace luong::models
