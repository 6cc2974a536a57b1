#include "luong/util/threads.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <omp.h>
#include <torch/torch.h>

#include <string>

namespace luong {
namespace {

// One OpenMP runtime in the process (the torch wheel's libgomp, which our OpenMP code links too),
// whose pool is LibTorch's intra-op pool and MKL's: configure_threads sets all of them at once.
TEST(ThreadsTest, OneOpenMpRuntimeSizedByConfigureThreads) {
  std::pair<std::string, int> gomp{"libgomp", 0};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* wanted = static_cast<std::pair<std::string, int>*>(data);
        const std::string path = info->dlpi_name == nullptr ? "" : info->dlpi_name;
        if (path.find(wanted->first) != std::string::npos) ++wanted->second;
        return 0;
      },
      &gomp);
  EXPECT_EQ(gomp.second, 1);
  EXPECT_EQ(configure_threads(1), 1);
  EXPECT_EQ(torch::get_num_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  EXPECT_EQ(configure_threads(2), 2);
  EXPECT_EQ(torch::get_num_threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_EQ(torch::get_num_interop_threads(), 1);
}

// With OpenBLAS loaded (as a foreign BLAS would be), its pool must end at one thread.
TEST(ThreadsTest, AForeignBlasPoolIsSetToOneThread) {
  void* openblas = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (openblas == nullptr) GTEST_SKIP() << "no OpenBLAS on this machine to load";
  using GetThreads = int (*)();
  using SetThreads = void (*)(int);
  reinterpret_cast<SetThreads>(::dlsym(openblas, "openblas_set_num_threads"))(2);
  EXPECT_GE(set_blas_threads_to_one(), 1);
  EXPECT_EQ(reinterpret_cast<GetThreads>(::dlsym(openblas, "openblas_get_num_threads"))(), 1);
  ::dlclose(openblas);
}

TEST(ThreadsTest, AvailableCoresIsPositive) { EXPECT_GE(available_cores(), 1); }

}  // namespace
}  // namespace luong
