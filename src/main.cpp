// luong: attention-based neural machine translation as Luong et al. (2015) describe it.
#include <cstring>
#include <iostream>
#include <string>

#include "luong/cli/commands.h"
#include "luong/util/error.h"

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
    {"cloze", luong::cli::cloze_command, "train the hand-differentiated self-attention cloze head"},
    {"gradcheck", nullptr, "compare the cloze head's manual gradients with autograd"},
};

void print_usage(std::ostream& out) {
  out << "usage: luong <command> [options]   (luong <command> --help for its options)\n\ncommands:\n";
  for (const auto& command : kCommands) {
    out << "  " << command.name << std::string(12 - std::strlen(command.name), ' ') << command.description << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return 1;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(std::cout);
    return 0;
  }
  if (name == "--version") {
    std::cout << "luong 0.1.0\n";
    return 0;
  }
  for (const auto& command : kCommands) {
    if (name != command.name) continue;
    try {
      return command.run != nullptr ? command.run(argc - 1, argv + 1)
                                    : luong::cli::run_in_commands_module(command.name, argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::cerr << "luong " << name << ": " << e.what() << std::endl;
      return 2;
    }
  }
  std::cerr << "luong: unknown command '" << name << "'\n\n";
  print_usage(std::cerr);
  return 1;
}
