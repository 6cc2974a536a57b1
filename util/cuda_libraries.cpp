#include "luong/util/cuda_libraries.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "luong/util/error.h"
#include "luong/util/module_path.h"

#ifndef LUONG_MODULE_INSTALL_DIR
#define LUONG_MODULE_INSTALL_DIR "/usr/local/lib"
#endif

namespace luong {
namespace {

constexpr const char* kCudaModule = "libluong_cuda.so";

// The CUDA module's code calls luong's own (the model, batches, FusedAdam), which it finds in the
// library that holds this function: the commands module, which the launcher opens RTLD_LOCAL. Made
// global, its symbols resolve the module's.
void make_own_symbols_global() {
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&load_cuda_libraries), &self) == 0 || self.dli_fname == nullptr) return;
  ::dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
}

// Empty where the CUDA libraries are in the process now, else why not.
std::string load() {
  if (::dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD) != nullptr) return {};
#ifndef LUONG_WITH_CUDA_MODULE
  return "this build of luong has no CUDA (its LibTorch was built without it)";
#else
  make_own_symbols_global();
  std::string failure;
  const int flags = RTLD_NOW | RTLD_GLOBAL;
  if (open_module(kCudaModule, "LUONG_CUDA_MODULE", LUONG_MODULE_INSTALL_DIR, flags, failure) == nullptr) return failure;
  if (!at::detail::getCUDAHooks().isBuilt()) {
    return std::string("LibTorch's CUDA hooks were looked up before ") + kCudaModule +
           " loaded, so this process cannot use CUDA (a bug in luong: please report it)";
  }
  return {};
#endif
}

}  // namespace

void load_cuda_libraries() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] { failure = load(); });
  if (!failure.empty()) throw Error(failure);
}

}  // namespace luong
