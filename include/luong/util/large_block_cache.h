#pragma once
// LibTorch's CPU allocator with its large freed blocks kept for reuse.

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace luong {

struct LargeBlockCacheStats {
  int64_t reused = 0;          ///< large requests served by a kept block
  int64_t allocated = 0;       ///< large requests that took a fresh block from the system
  int64_t released = 0;        ///< kept blocks given back to the system
  std::size_t kept_bytes = 0;  ///< bytes in the blocks kept free now
};

/// A c10::Allocator that passes requests under `large_bytes` to `small` (LibTorch's own CPU
/// allocator, which glibc's heap serves: configure_allocator() keeps its freed blocks), and keeps
/// freed blocks of `large_bytes` or more for the next large request. glibc maps such blocks afresh
/// (32 MiB is the largest mmap threshold it accepts), so without this a tensor that size faults its
/// pages in and has them zeroed at every training step: the batch-512 notebook step's loss logits,
/// a large vocabulary's weight gradient. A request takes the smallest kept block that holds it and
/// is no more than twice its size. At most `kept_limit` bytes stay kept, the longest-kept block
/// going first (a block larger than that goes back at once); a failed allocation, of either size,
/// gives every kept block back and tries once more. Thread-safe. The raw interface (raw_allocate / raw_deallocate),
/// which LibTorch's CUDA graphs use, works for blocks of either size.
class LargeBlockCache final : public c10::Allocator {
 public:
  LargeBlockCache(c10::Allocator* small, std::size_t large_bytes, std::size_t kept_limit);
  /// Gives the kept blocks back; a block still in use is given back when it is freed.
  ~LargeBlockCache() override;
  LargeBlockCache(const LargeBlockCache&) = delete;
  LargeBlockCache& operator=(const LargeBlockCache&) = delete;

  c10::DataPtr allocate(std::size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  LargeBlockCacheStats stats() const;
  std::size_t large_bytes() const { return large_bytes_; }

 private:
  struct Block {
    void* data;
    std::size_t bytes;
  };
  static void release(void* data);  // every large block's deleter, and the raw one

  void* allocate_large(std::size_t bytes);
  // Allocates; if that fails for want of memory, gives every kept block back and tries once more.
  template <typename Allocate>
  auto with_one_retry(const Allocate& allocate) -> decltype(allocate());
  // Both with the registry's lock held (large_block_cache.cpp).
  void keep(Block block);
  void release_kept_beyond(std::size_t bytes);  // the longest-kept blocks go until at most `bytes` stay kept

  c10::Allocator* small_;
  std::size_t large_bytes_;
  std::size_t kept_limit_;
  std::vector<Block> kept_;  // oldest first
  LargeBlockCacheStats stats_;
};

/// Installs a LargeBlockCache (blocks of 32 MiB or more, at most 1 GiB kept) as LibTorch's CPU
/// allocator, over the allocator it had; once per process, later calls return the same cache.
/// configure_threads() calls it.
LargeBlockCache& install_large_block_cache();

}  // namespace luong
