// luong: attention-based neural machine translation as Luong et al. (2015) describe it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "luong/cli/commands.h"
#include "luong/cli/option_flags.h"
#include "luong/util/error.h"

#ifndef LUONG_VERSION
#define LUONG_VERSION "unknown"
#endif

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);  ///< null: the command lives in the LibTorch commands module
  const char* description;
};

constexpr Command kCommands[] = {
    {"train", nullptr, "train a model on a parallel corpus (TSV or OPUS)"},
    {"evaluate", nullptr, "test loss, perplexity, BLEU and chrF of a trained model"},
    {"translate", nullptr, "translate sentences from stdin (greedy or beam search)"},
    {"trace", nullptr, "show a sentence's attention, step by step; heat map PNG and CSV"},
    {"serve", nullptr, "serve trained models over HTTP/JSON, batching concurrent requests"},
    {"cloze", luong::cli::cloze_command, "train the hand-differentiated self-attention cloze head"},
    {"gradcheck", nullptr, "compare the cloze head's manual gradients with autograd"},
};

void print_usage(std::ostream& out) {
  out << "usage: luong <command> [options]   (luong <command> --help for its options; luong --version)\n\ncommands:\n";
  for (const auto& command : kCommands) {
    out << "  " << command.name << std::string(12 - std::strlen(command.name), ' ') << command.description << "\n";
  }
}

int run_command(const Command& command, int argc, char** argv) {
  try {
    return command.run != nullptr ? command.run(argc, argv) : luong::cli::run_in_commands_module(command.name, argc, argv);
  } catch (...) {
    return luong::cli::report_failure(command.name, luong::cli::describe_current_exception());
  }
}

int print_version(int argc, char** argv) {
  std::cout << "luong " << LUONG_VERSION << std::endl;
  try {
    return luong::cli::run_in_commands_module("--version", argc, argv);
  } catch (...) {
    return luong::cli::report_failure("--version", luong::cli::describe_current_exception());
  }
}

int run(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(std::cout);
    return 0;
  }
  if (name == "--version" || name == "version") return print_version(argc - 1, argv + 1);
  for (const auto& command : kCommands) {
    if (name == command.name) return run_command(command, argc - 1, argv + 1);
  }
  std::string names;
  for (const auto& command : kCommands) names += std::string(names.empty() ? "" : ", ") + command.name;
  std::cerr << "luong: unknown command '" << luong::printable(name) << "' (commands: " << names << "; see luong --help)"
            << std::endl;
  return 2;
}

// Every command has written and closed its files by now; what is left is LibTorch's static
// destructors (its operator registries, a quarter of a `luong --version`), which free
// memory that the process is about to give back anyway. The sanitizers' builds exit normally: the
// leak checker runs at exit. Output that could not be written (a full disk, a closed pipe) fails a
// command that otherwise succeeded, as the commands' own checks do: std::cout first, whose flush
// also flushes C's stdout while the two are synchronised (printf's output too), then the rest.
[[noreturn]] void exit_without_static_destructors(const char* command, int code) {
  try {
    luong::cli::check_written(std::cout, "stdout");
  } catch (const luong::Error& e) {
    if (code == 0) code = luong::cli::report_failure(command, e.what());
  }
  std::fflush(nullptr);
#ifdef LUONG_SANITIZED
  std::exit(code);
#else
  std::_Exit(code);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const int code = run(argc, argv);
  exit_without_static_destructors(argc > 1 ? argv[1] : "", code);
}
