// libluong_commands.so: every subcommand that needs LibTorch, behind a C entry point.
#include <torch/torch.h>

#include <cstring>
#include <iostream>
#include <string>

#include "luong/cli/commands.h"
#include "luong/util/error.h"

namespace {

struct ModuleCommand {
  const char* name;
  int (*run)(int, char**);
};

constexpr ModuleCommand kModuleCommands[] = {
    {"train", luong::cli::train_command},         {"evaluate", luong::cli::evaluate_command},
    {"translate", luong::cli::translate_command}, {"trace", luong::cli::trace_command},
    {"gradcheck", luong::cli::gradcheck_command},
};

}  // namespace

extern "C" int luong_commands_run(const char* name, int argc, char** argv) {
  for (const auto& command : kModuleCommands) {
    if (std::strcmp(name, command.name) != 0) continue;
    try {
      return command.run(argc, argv);
    } catch (const luong::Error& e) {
      std::cerr << "luong " << name << ": " << e.what() << std::endl;
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      std::cerr << "luong " << name << ": " << what.substr(0, what.find('\n')) << std::endl;
    } catch (const std::exception& e) {
      std::cerr << "luong " << name << ": " << e.what() << std::endl;
    }
    return 2;
  }
  std::cerr << "luong: the commands module has no command '" << name << "'" << std::endl;
  return 1;
}

extern "C" void luong_commands_randn(double* out, std::size_t count, unsigned seed) {
  torch::manual_seed(seed);
  const torch::Tensor draws = torch::randn({static_cast<int64_t>(count)}, torch::kDouble);
  std::memcpy(out, draws.data_ptr<double>(), count * sizeof(double));
}
