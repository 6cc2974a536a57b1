#include <dlfcn.h>

#include <mutex>
#include <string>

#include "luong/cli/commands.h"
#include "luong/util/error.h"
#include "luong/util/module_path.h"

#ifndef LUONG_MODULE_INSTALL_DIR
#define LUONG_MODULE_INSTALL_DIR "/usr/local/lib"
#endif

namespace luong::cli {
namespace {

constexpr const char* kModuleName = "libluong_commands.so";

void* module_symbol(const char* symbol) {
  static void* handle = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    handle =
        open_module(kModuleName, "LUONG_COMMANDS_MODULE", LUONG_MODULE_INSTALL_DIR, RTLD_LAZY | RTLD_LOCAL, failure);
  });
  if (handle == nullptr) throw Error(failure);
  void* fn = ::dlsym(handle, symbol);
  if (fn == nullptr) throw Error(std::string(kModuleName) + " lacks " + symbol);
  return fn;
}

}  // namespace

int run_in_commands_module(const char* name, int argc, char** argv) {
  const auto run = reinterpret_cast<int (*)(const char*, int, char**)>(module_symbol("luong_commands_run"));
  return run(name, argc, argv);
}

std::function<std::vector<double>(std::size_t, unsigned)> torch_randn_from_module() {
  const auto randn = reinterpret_cast<void (*)(double*, std::size_t, unsigned)>(module_symbol("luong_commands_randn"));
  return [randn](std::size_t count, unsigned seed) {
    std::vector<double> out(count);
    randn(out.data(), count, seed);
    return out;
  };
}

}  // namespace luong::cli
