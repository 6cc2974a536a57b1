#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/option_flags.h"
#include "luong/cloze/cloze_run.h"

namespace luong::cli {

int cloze_command(int argc, char** argv) {
  cxxopts::Options parser("luong cloze", "Train one self-attention head as a cloze task on UDHR sentences "
                                         "(the numpy seed, with a hand-written backward pass).");
  add_flags(parser, cloze::ClozeRunOptions{});
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  cloze::ClozeRunOptions run;
  apply_flags(result, run);
  if (run.init == cloze::ClozeInit::kTorch) run.torch_randn = torch_randn_from_module();
  cloze::run_cloze(run, std::cout);  // (main checks that stdout was written)
  return 0;
}

}  // namespace luong::cli
