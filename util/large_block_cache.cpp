#include "luong/util/large_block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>

namespace luong {

namespace {

// Every large block of every cache in this library, in use or kept, by its address: a deleter is a
// plain function of the address alone (the raw interface's contract), so it finds its cache here.
struct Registry {
  struct Owner {
    LargeBlockCache* cache;  // nullptr once the cache is gone: the block is then freed with its last use
    std::size_t bytes;
  };
  std::mutex mutex;
  std::unordered_map<void*, Owner> blocks;
  c10::DeleterFnPtr small_raw_deleter = nullptr;  // what frees a raw small block: the caches' shared `small`'s
};

Registry& registry() {
  static Registry* const instance = new Registry;  // never destroyed: tensors may outlive static destructors
  return *instance;
}

// With the registry's lock held: a large block back to the system.
void free_block(Registry& blocks, void* data) {
  blocks.blocks.erase(data);
  c10::free_cpu(data);
}

}  // namespace

LargeBlockCache::LargeBlockCache(c10::Allocator* small, std::size_t large_bytes, std::size_t kept_limit)
    : small_(small), large_bytes_(large_bytes), kept_limit_(kept_limit) {
  TORCH_CHECK(small != nullptr && large_bytes > 0, "LargeBlockCache: needs an allocator for small blocks");
  const c10::DeleterFnPtr small_raw = small->raw_deleter();
  TORCH_CHECK(small_raw != &LargeBlockCache::release, "LargeBlockCache: the small blocks' allocator is a cache");
  Registry& blocks = registry();
  const std::lock_guard<std::mutex> lock(blocks.mutex);
  if (small_raw == nullptr) return;  // no raw interface, so no raw small block to free
  if (blocks.small_raw_deleter == nullptr) blocks.small_raw_deleter = small_raw;
  TORCH_CHECK(blocks.small_raw_deleter == small_raw,
              "LargeBlockCache: every cache needs the same small blocks' allocator");
}

LargeBlockCache::~LargeBlockCache() {
  Registry& blocks = registry();
  const std::lock_guard<std::mutex> lock(blocks.mutex);
  release_kept_beyond(0);
  for (auto& [data, owner] : blocks.blocks) {
    if (owner.cache == this) owner.cache = nullptr;
  }
}

template <typename Allocate>
auto LargeBlockCache::with_one_retry(const Allocate& allocate) -> decltype(allocate()) {
  try {
    return allocate();
  } catch (const c10::Error&) {
    {
      const std::lock_guard<std::mutex> lock(registry().mutex);
      release_kept_beyond(0);
    }
    return allocate();
  }
}

c10::DataPtr LargeBlockCache::allocate(std::size_t bytes) {
  if (bytes < large_bytes_) return with_one_retry([&] { return small_->allocate(bytes); });
  void* data = allocate_large(bytes);
  return {data, data, &LargeBlockCache::release, c10::Device(c10::DeviceType::CPU)};
}

void* LargeBlockCache::allocate_large(std::size_t bytes) {
  Registry& blocks = registry();
  {
    const std::lock_guard<std::mutex> lock(blocks.mutex);
    auto best = kept_.end();
    for (auto block = kept_.begin(); block != kept_.end(); ++block) {
      if (block->bytes >= bytes && block->bytes / 2 <= bytes && (best == kept_.end() || block->bytes < best->bytes)) {
        best = block;
      }
    }
    if (best != kept_.end()) {
      void* data = best->data;
      stats_.kept_bytes -= best->bytes;
      kept_.erase(best);
      ++stats_.reused;
      return data;
    }
  }
  void* data = with_one_retry([&] { return c10::alloc_cpu(bytes); });
  const std::lock_guard<std::mutex> lock(blocks.mutex);
  blocks.blocks.emplace(data, Registry::Owner{this, bytes});
  ++stats_.allocated;
  return data;
}

void LargeBlockCache::release(void* data) {
  Registry& blocks = registry();
  c10::DeleterFnPtr small_raw_deleter = nullptr;
  {
    const std::lock_guard<std::mutex> lock(blocks.mutex);
    const auto owner = blocks.blocks.find(data);
    if (owner != blocks.blocks.end()) {
      if (owner->second.cache != nullptr) {
        owner->second.cache->keep({data, owner->second.bytes});
      } else {
        free_block(blocks, data);  // its cache is gone
      }
      return;
    }
    small_raw_deleter = blocks.small_raw_deleter;
  }
  small_raw_deleter(data);  // a small block handed out through the raw interface
}

void LargeBlockCache::keep(Block block) {
  if (block.bytes > kept_limit_) {
    ++stats_.released;
    free_block(registry(), block.data);
    return;
  }
  kept_.push_back(block);
  stats_.kept_bytes += block.bytes;
  release_kept_beyond(kept_limit_);
}

void LargeBlockCache::release_kept_beyond(std::size_t bytes) {
  Registry& blocks = registry();
  while (stats_.kept_bytes > bytes) {
    const Block oldest = kept_.front();
    kept_.erase(kept_.begin());
    stats_.kept_bytes -= oldest.bytes;
    ++stats_.released;
    free_block(blocks, oldest.data);
  }
}

c10::DeleterFnPtr LargeBlockCache::raw_deleter() const {
  return small_->raw_deleter() == nullptr ? nullptr : &LargeBlockCache::release;
}

void LargeBlockCache::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

LargeBlockCacheStats LargeBlockCache::stats() const {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  return stats_;
}

LargeBlockCache& install_large_block_cache() {
  static LargeBlockCache* const cache = [] {
    // Blocks from 32 MiB, glibc's largest mmap threshold: below it configure_allocator() has glibc
    // keep freed blocks in its heap. 1 GiB kept at most: a batch-512 notebook run keeps a few.
    auto* installed = new LargeBlockCache(c10::GetCPUAllocator(), std::size_t{32} << 20, std::size_t{1} << 30);
    c10::SetCPUAllocator(installed);
    return installed;
  }();
  return *cache;
}

}  // namespace luong
