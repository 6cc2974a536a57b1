#include "luong/util/threads.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <set>

namespace luong {
namespace {

// With OpenBLAS loaded (LibTorch's BLAS on Debian), its pool must end at one thread whatever the
// environment asked for; the intra-op threads are LibTorch's alone.
TEST(ThreadsTest, BlasPoolIsSetToOneThread) {
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (get == nullptr) GTEST_SKIP() << "OpenBLAS is not the BLAS here";
  using SetThreads = void (*)(int);
  reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))(2);
  EXPECT_GE(set_blas_threads_to_one(), 1);
  EXPECT_EQ(get(), 1);
}

TEST(ThreadsTest, AvailableCoresIsPositive) { EXPECT_GE(available_cores(), 1); }

}  // namespace
}  // namespace luong
