#pragma once
// The `luong` subcommands. Each parses its own options into the library's option structs and
// returns the process exit status: 0 success, 2 bad input or a failure (one line on stderr),
// 3 failed check (gradcheck past tolerance), 130 interrupted (training saved a checkpoint).
//
// The `luong` executable does not link LibTorch: loading it (and the CUDA libraries the torch wheel
// brings) costs ~0.5 s, more than the whole cloze run. The commands that need it live in
// libluong_commands.so, loaded on first use (run_in_commands_module).
#include <cstddef>
#include <functional>
#include <vector>

namespace luong::cli {

// In the executable.
int cloze_command(int argc, char** argv);

// In libluong_commands.so.
int train_command(int argc, char** argv);
int evaluate_command(int argc, char** argv);
int translate_command(int argc, char** argv);
int trace_command(int argc, char** argv);
int gradcheck_command(int argc, char** argv);
int serve_command(int argc, char** argv);
/// `luong --version`'s lines after the first.
int version_command(int argc, char** argv);

/// Loads libluong_commands.so (beside the executable, in ../lib, in $LUONG_COMMANDS_MODULE or the
/// install directory) and runs the command `name` there. Throws luong::Error if it cannot be loaded.
int run_in_commands_module(const char* name, int argc, char** argv);

/// standard-normal draws from LibTorch's generator after torch::manual_seed(seed), via the module.
std::function<std::vector<double>(std::size_t, unsigned)> torch_randn_from_module();

}  // namespace luong::cli

extern "C" {
/// The module's entry points (C linkage, looked up with dlsym).
int luong_commands_run(const char* name, int argc, char** argv);
void luong_commands_randn(double* out, std::size_t count, unsigned seed);
}
