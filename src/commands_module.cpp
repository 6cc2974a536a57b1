// libluong_commands.so: every subcommand that needs LibTorch, behind a C entry point, and the one
// place where their failures become a line on stderr.
#include <torch/torch.h>

#include <cstring>
#include <iostream>
#include <string>

#include "luong/cli/commands.h"
#include "luong/cli/option_flags.h"
#include "luong/models/matrix_products.h"
#include "luong/util/error.h"

namespace {

struct ModuleCommand {
  const char* name;
  int (*run)(int, char**);
};

constexpr ModuleCommand kModuleCommands[] = {
    {"train", luong::cli::train_command},         {"evaluate", luong::cli::evaluate_command},
    {"translate", luong::cli::translate_command}, {"trace", luong::cli::trace_command},
    {"gradcheck", luong::cli::gradcheck_command}, {"serve", luong::cli::serve_command},
    {"--version", luong::cli::version_command},
};

std::string describe_failure() {
  try {
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    return "out of memory (" + luong::cli::first_line(e.what_without_backtrace()) + ")";
  } catch (const c10::Error& e) {
    const std::string what = luong::cli::first_line(e.what_without_backtrace());
    if (what.find("not enough memory") != std::string::npos || what.find("allocate memory") != std::string::npos) {
      return "out of memory (" + what.substr(what.find("DefaultCPUAllocator") == std::string::npos
                                                 ? 0
                                                 : what.find("DefaultCPUAllocator")) + ")";
    }
    return "LibTorch: " + what;
  } catch (...) {
    return luong::cli::describe_current_exception();
  }
}

}  // namespace

extern "C" int luong_commands_run(const char* name, int argc, char** argv) {
  for (const auto& command : kModuleCommands) {
    if (std::strcmp(name, command.name) != 0) continue;
    try {
      return command.run(argc, argv);
    } catch (...) {
      return luong::cli::report_failure(name, describe_failure());
    }
  }
  return luong::cli::report_failure(name, "the commands module has no such command");
}

extern "C" void luong_commands_randn(double* out, std::size_t count, unsigned seed) {
  torch::manual_seed(seed);
  const torch::Tensor draws = torch::randn({static_cast<int64_t>(count)}, torch::kDouble);
  std::memcpy(out, draws.data_ptr<double>(), count * sizeof(double));
}
