// The CPU allocator's kept large blocks: reuse, the bound, the raw interface, a failed allocation,
// and the cache installed as LibTorch's CPU allocator. The unit tests use caches of their own with
// blocks from 1 MiB, over LibTorch's default CPU allocator.
#include "luong/util/large_block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "luong/util/threads.h"

namespace luong {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

LargeBlockCache small_cache(std::size_t kept_limit = 64 * kMiB) {
  return LargeBlockCache(c10::GetDefaultCPUAllocator(), kMiB, kept_limit);
}

c10::DataPtr written(LargeBlockCache& cache, std::size_t bytes) {
  c10::DataPtr block = cache.allocate(bytes);
  std::memset(block.get(), 0x5a, bytes);  // every byte is ours: the sanitizers would see an overrun
  return block;
}

TEST(LargeBlockCacheTest, AFreedBlockIsHandedOutAgainAndAHeldOneNever) {
  LargeBlockCache cache = small_cache();
  c10::DataPtr first = written(cache, 2 * kMiB);
  c10::DataPtr second = written(cache, 2 * kMiB);
  EXPECT_NE(first.get(), second.get());
  void* const first_data = first.get();
  first.clear();
  EXPECT_EQ(cache.stats().kept_bytes, 2 * kMiB);
  c10::DataPtr third = written(cache, 3 * kMiB / 2);  // fits the kept block: it comes back
  EXPECT_EQ(third.get(), first_data);
  c10::DataPtr fourth = written(cache, 2 * kMiB);  // the only 2 MiB blocks are held: a fresh one
  EXPECT_NE(fourth.get(), second.get());
  EXPECT_NE(fourth.get(), third.get());
  const LargeBlockCacheStats stats = cache.stats();
  EXPECT_EQ(stats.reused, 1);
  EXPECT_EQ(stats.allocated, 3);
  EXPECT_EQ(stats.released, 0);
  EXPECT_EQ(stats.kept_bytes, 0u);
}

// The smallest kept block that holds the request, and none more than twice its size.
TEST(LargeBlockCacheTest, ARequestTakesTheSmallestBlockAtMostTwiceItsSize) {
  LargeBlockCache cache = small_cache();
  c10::DataPtr large = written(cache, 8 * kMiB), medium = written(cache, 4 * kMiB);
  void* const medium_data = medium.get();
  void* const large_data = large.get();
  large.clear();
  medium.clear();
  c10::DataPtr under_half = written(cache, 3 * kMiB / 2);  // half of 4 MiB is more than it needs
  EXPECT_NE(under_half.get(), medium_data);
  EXPECT_NE(under_half.get(), large_data);
  c10::DataPtr half = written(cache, 2 * kMiB);
  EXPECT_EQ(half.get(), medium_data);
  c10::DataPtr most = written(cache, 8 * kMiB);
  EXPECT_EQ(most.get(), large_data);
  EXPECT_EQ(cache.stats().reused, 2);
  EXPECT_EQ(cache.stats().allocated, 3);
}

TEST(LargeBlockCacheTest, KeptBytesStayWithinTheLimitTheLongestKeptGoingFirst) {
  LargeBlockCache cache = small_cache(5 * kMiB);
  c10::DataPtr a = written(cache, 2 * kMiB), b = written(cache, 2 * kMiB), c = written(cache, 2 * kMiB);
  void* const b_data = b.get();
  a.clear();
  b.clear();
  EXPECT_EQ(cache.stats().kept_bytes, 4 * kMiB);
  c.clear();  // 6 MiB kept would pass the limit: `a` goes
  EXPECT_EQ(cache.stats().kept_bytes, 4 * kMiB);
  EXPECT_EQ(cache.stats().released, 1);
  c10::DataPtr again = written(cache, 2 * kMiB);
  EXPECT_EQ(again.get(), b_data);  // the longest kept of those left
  c10::DataPtr too_large = written(cache, 6 * kMiB);
  too_large.clear();  // larger than the limit: given back at once
  EXPECT_EQ(cache.stats().kept_bytes, 2 * kMiB);
  EXPECT_EQ(cache.stats().released, 2);
}

TEST(LargeBlockCacheTest, SmallRequestsGoToTheSmallBlocksAllocator) {
  LargeBlockCache cache = small_cache();
  c10::DataPtr small = cache.allocate(kMiB - 1);
  EXPECT_EQ(small.get_deleter(), c10::GetDefaultCPUAllocator()->raw_deleter());
  small.clear();
  const LargeBlockCacheStats stats = cache.stats();
  EXPECT_EQ(stats.allocated + stats.reused, 0);
  EXPECT_EQ(stats.kept_bytes, 0u);
}

// LibTorch's CUDA graphs take host memory through the CPU allocator's raw interface.
TEST(LargeBlockCacheTest, TheRawInterfaceServesBothSizes) {
  LargeBlockCache cache = small_cache();
  ASSERT_NE(cache.raw_deleter(), nullptr);
  void* large = cache.raw_allocate(2 * kMiB);
  std::memset(large, 1, 2 * kMiB);
  cache.raw_deallocate(large);
  EXPECT_EQ(cache.stats().kept_bytes, 2 * kMiB);
  void* small = cache.raw_allocate(1000);
  std::memset(small, 1, 1000);
  cache.raw_deallocate(small);  // to the default allocator's deleter: the sanitizers see it freed once
  EXPECT_EQ(cache.raw_allocate(2 * kMiB), large);
  cache.raw_deallocate(large);
  EXPECT_EQ(cache.stats().reused, 1);
}

TEST(LargeBlockCacheTest, AFailedAllocationGivesTheKeptBlocksBackAndThrows) {
  LargeBlockCache cache = small_cache();
  written(cache, 2 * kMiB).clear();
  EXPECT_EQ(cache.stats().kept_bytes, 2 * kMiB);
  EXPECT_THROW(cache.allocate(std::size_t{1} << 60), c10::Error);
  EXPECT_EQ(cache.stats().kept_bytes, 0u);
  EXPECT_EQ(cache.stats().released, 1);
}

// Threads allocating and freeing at once: no block is handed to two holders (each holder's bytes
// stay its own until it frees them), every request is counted once, and the bound holds.
TEST(LargeBlockCacheTest, ThreadsNeverShareABlock) {
  LargeBlockCache cache = small_cache(6 * kMiB);
  constexpr int kThreads = 4, kRounds = 100;
  std::atomic<int> overwritten{0};
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      for (int round = 0; round < kRounds; ++round) {
        const std::size_t bytes = kMiB + static_cast<std::size_t>((id * kRounds + round) % 5) * kMiB / 2;
        c10::DataPtr block = cache.allocate(bytes);
        auto* data = static_cast<unsigned char*>(block.get());
        std::memset(data, id + 1, bytes);
        std::this_thread::yield();
        for (std::size_t i = 0; i < bytes; i += 4096) {
          if (data[i] != id + 1) ++overwritten;
        }
        if (data[bytes - 1] != id + 1) ++overwritten;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overwritten.load(), 0);
  const LargeBlockCacheStats stats = cache.stats();
  EXPECT_EQ(stats.reused + stats.allocated, kThreads * kRounds);
  EXPECT_GT(stats.reused, 0);
  EXPECT_LE(stats.kept_bytes, 6 * kMiB);
}

// A small allocator that has run out of memory, and has no raw interface.
struct ExhaustedAllocator final : c10::Allocator {
  c10::DataPtr allocate(std::size_t bytes) override {
    ++calls;
    TORCH_CHECK(false, "ExhaustedAllocator: no memory for ", bytes, " bytes");
    return {};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  int calls = 0;
};

TEST(LargeBlockCacheTest, ASmallAllocationThatFailsGivesTheKeptBlocksBackAndTriesOnceMore) {
  ExhaustedAllocator exhausted;
  LargeBlockCache cache(&exhausted, kMiB, 64 * kMiB);
  EXPECT_EQ(cache.raw_deleter(), nullptr);  // as its small blocks' allocator
  written(cache, 2 * kMiB).clear();
  EXPECT_EQ(cache.stats().kept_bytes, 2 * kMiB);
  EXPECT_THROW(cache.allocate(1000), c10::Error);
  EXPECT_EQ(exhausted.calls, 2);
  EXPECT_EQ(cache.stats().kept_bytes, 0u);
  EXPECT_EQ(cache.stats().released, 1);
}

// What every command gets: configure_threads installs the cache (blocks from 32 MiB) as LibTorch's
// CPU allocator, and a freed large tensor's block serves the next one.
TEST(LargeBlockCacheTest, ConfigureThreadsInstallsItAsLibTorchsCpuAllocator) {
  configure_threads(2);
  LargeBlockCache& cache = install_large_block_cache();
  EXPECT_EQ(c10::GetCPUAllocator(), &cache);
  EXPECT_EQ(cache.large_bytes(), 32 * kMiB);
  const LargeBlockCacheStats before = cache.stats();
  void* first_data = nullptr;
  {
    const torch::Tensor first = torch::ones({40 * static_cast<int64_t>(kMiB) / 4});
    first_data = first.data_ptr();
    EXPECT_EQ(first.sum().item<double>(), 10.0 * kMiB);
  }
  const torch::Tensor second = torch::full({36 * static_cast<int64_t>(kMiB) / 4}, 2.0f);
  EXPECT_EQ(second.data_ptr(), first_data);
  EXPECT_EQ(second.sum().item<double>(), 18.0 * kMiB);
  const torch::Tensor small = torch::zeros({1000});
  EXPECT_EQ(cache.stats().reused - before.reused, 1);
  EXPECT_EQ(cache.stats().allocated - before.allocated, 1);
}

}  // namespace
}  // namespace luong
