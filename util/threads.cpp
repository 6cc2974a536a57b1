#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <sched.h>

#include <initializer_list>
#include <set>
#include <string>
#include <thread>

#include "luong/util/threads.h"

namespace luong {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

namespace {

// Calls the thread setters that `handle` (a library, or RTLD_DEFAULT) resolves, each at most once.
void call_thread_setters(void* handle, std::set<void*>& called) {
  using SetThreads = void (*)(int);
  for (const char* name : {"openblas_set_num_threads", "goto_set_num_threads", "bli_thread_set_num_threads"}) {
    void* fn = ::dlsym(handle, name);
    if (fn != nullptr && called.insert(fn).second) reinterpret_cast<SetThreads>(fn)(1);
  }
  using MklSetThreads = int (*)(int);
  if (void* fn = ::dlsym(handle, "MKL_Set_Num_Threads_Local"); fn != nullptr && called.insert(fn).second) {
    reinterpret_cast<MklSetThreads>(fn)(1);
  }
}

// dl_iterate_phdr callback: the thread setters of a loaded library named like a BLAS.
int visit_loaded_library(dl_phdr_info* info, std::size_t, void* called_setters) {
  // Only such names: dlsym on a handle searches that library's whole dependency tree, and
  // LibTorch's Debian build loads nearly 300 libraries.
  const std::string path = info->dlpi_name == nullptr ? "" : info->dlpi_name;
  const std::string file = path.substr(path.find_last_of('/') + 1);
  if (file.find("blas") == std::string::npos && file.find("blis") == std::string::npos &&
      file.find("mkl") == std::string::npos) {
    return 0;
  }
  void* handle = ::dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  call_thread_setters(handle, *static_cast<std::set<void*>*>(called_setters));
  ::dlclose(handle);
  return 0;
}

}  // namespace

int set_blas_threads_to_one() {
  // BLAS libraries export their own thread setters; whichever is loaded is found at run time so
  // that the program needs no environment variables and links against any BLAS. First the global
  // scope (a BLAS linked into the executable, or loaded globally, whatever its name); then every
  // loaded library named like a BLAS, because the LibTorch commands are a module loaded with
  // RTLD_LOCAL, whose BLAS the global scope does not see.
  std::set<void*> called;
  call_thread_setters(RTLD_DEFAULT, called);
  ::dl_iterate_phdr(visit_loaded_library, &called);
  return static_cast<int>(called.size());
}

}  // namespace luong

namespace luong {

void configure_allocator() {
  // glibc serves blocks above the mmap threshold (128 KiB at first) with fresh mmap()s, and every
  // such tensor then costs page faults and zeroing on each training step. Raising the thresholds
  // keeps freed activations in the heap for reuse (docs/PERFORMANCE.md).
  // Some glibc versions refuse a threshold above 32 MiB (half their largest heap). Setting the trim
  // threshold below fixes the mmap threshold wherever it stands, so a refused 64 MiB would leave it
  // at 128 KiB, and every large activation would fault its pages in again.
  if (::mallopt(M_MMAP_THRESHOLD, 64 << 20) == 0) ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  ::mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace luong
