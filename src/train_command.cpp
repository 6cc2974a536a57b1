#include <filesystem>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/option_flags.h"
#include "luong/run/run_directory.h"
#include "luong/training/trainer.h"
#include "luong/util/error.h"

namespace luong::cli {

int train_command(int argc, char** argv) {
  cxxopts::Options parser("luong train", "Train an attention-based translation model (Luong et al. 2015).");
  add_flags(parser, run::TrainConfig{});
  parser.add_options("training")
      ("config", "start from this config.json (flags given here override it)", cxxopts::value<std::string>())
      ("resume", "continue the run in --out from its last checkpoint (only runtime, --epochs, --max-time, --precision, --lr, --clip, --patience and --profile-steps may change)")
      ("overwrite", "start afresh in an --out that holds a trained model, removing the files of that run first");
  training::DistributedOptions distributed = training::DistributedOptions::from_environment();
  add_flags(parser, distributed);
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  apply_flags(result, distributed);
  distributed.validate();

  const bool resume = flag_given(result, "resume");
  // Ranks other than 0 take the run's configuration from rank 0 and need no run directory.
  const bool follower = distributed.enabled() && distributed.rank != 0;
  run::TrainConfig config;
  if (resume && result.count("config")) throw Error("--resume continues the run's own config.json; drop --config");
  if (resume && !follower) {
    run::TrainConfig out_only;
    apply_flags(result, out_only);
    const run::RunPaths paths(out_only.out);
    if (!std::filesystem::exists(paths.config)) throw Error(printable(out_only.out) + ": nothing to resume (no config.json)");
    config = run::TrainConfig::load(paths.config);
  } else if (result.count("config") && !follower) {
    config = run::TrainConfig::load(result["config"].as<std::string>());
  }
  apply_flags(result, config);
  distributed.given_options = given_keys(result, config);
  const training::TrainResult trained = training::train(config, resume, distributed, flag_given(result, "overwrite"));
  if (trained.interrupted) return 130;
  if (!follower) std::cerr << "luong train: done; model in " << config.out << "/model.pt" << std::endl;
  return 0;
}

}  // namespace luong::cli
