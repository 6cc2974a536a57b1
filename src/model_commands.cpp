#include "luong/cli/model_commands.h"

#include "luong/cli/option_flags.h"
#include "luong/run/runtime.h"
#include "luong/util/error.h"

namespace luong::cli {

void add_model_flags(cxxopts::Options& parser) {
  parser.add_options("model")("model", "run directory written by luong train; several (--model A --model B) "
                                       "translate as an ensemble averaging log-probabilities",
                              cxxopts::value<std::vector<std::string>>());
  add_flags(parser, run::ModelOptions{});
  add_flags(parser, run::RuntimeOptions{});
}

std::vector<run::TrainedModel> load_models_from_flags(const cxxopts::ParseResult& result) {
  if (!result.count("model")) throw Error("--model RUN_DIR is required");
  run::RuntimeOptions runtime;
  apply_flags(result, runtime);
  run::ModelOptions choice;
  apply_flags(result, choice);
  const run::Runtime applied = run::apply_runtime(runtime);
  std::vector<run::TrainedModel> models;
  for (const std::string& dir : result["model"].as<std::vector<std::string>>()) {
    models.push_back(run::load_trained_model(dir, applied.device, choice.weights));
  }
  return models;
}

std::vector<run::TrainedModel*> pointers(std::vector<run::TrainedModel>& models) {
  std::vector<run::TrainedModel*> out;
  for (auto& m : models) out.push_back(&m);
  return out;
}

}  // namespace luong::cli
