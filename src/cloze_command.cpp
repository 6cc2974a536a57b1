#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/options.h"
#include "luong/cloze/cloze_run.h"
#include "luong/cloze/udhr_corpus.h"
#include "luong/util/error.h"

namespace luong::cli {

int cloze_command(int argc, char** argv) {
  cxxopts::Options options("luong cloze", "Train one self-attention head as a cloze task on UDHR sentences "
                                          "(the numpy seed, with a hand-written backward pass).");
  options.add_options()
      ("epochs", "full-corpus Adam updates", cxxopts::value<int>()->default_value("4000"))
      ("out", "directory for attention_loss.csv, attention_weights.csv, attention.png",
       cxxopts::value<std::string>()->default_value("."))
      ("init", "numpy (the seed's exact draws) or torch", cxxopts::value<std::string>()->default_value("numpy"))
      ("seed", "random seed", cxxopts::value<unsigned>()->default_value("0"))
      ("threads", "threads for the sentences of an update (0 = all cores)", cxxopts::value<int>()->default_value("0"));
  cxxopts::ParseResult result;
  if (!parse_or_help(options, argc, argv, result)) return 0;
  cloze::ClozeRunOptions run;
  run.updates = result["epochs"].as<int>();
  run.out_dir = result["out"].as<std::string>();
  run.init = result["init"].as<std::string>();
  run.seed = result["seed"].as<unsigned>();
  run.threads = result["threads"].as<int>();
  if (run.init == "torch") run.torch_randn = torch_randn_from_module();
  cloze::run_cloze(run, std::cout);
  return 0;
}

}  // namespace luong::cli
