#include "luong/cli/model_commands.h"

#include <cerrno>
#include <cstring>

#include "luong/cli/option_flags.h"
#include "luong/run/runtime.h"
#include "luong/util/error.h"

namespace luong::cli {

void add_model_flags(cxxopts::Options& parser) {
  parser.add_options("model")("model", "run directory written by luong train", cxxopts::value<std::string>());
  add_flags(parser, run::RuntimeOptions{});
}

run::TrainedModel load_model_from_flags(const cxxopts::ParseResult& result) {
  if (!result.count("model")) throw Error("--model RUN_DIR is required");
  run::RuntimeOptions runtime;
  apply_flags(result, runtime);
  const run::Runtime applied = run::apply_runtime(runtime);
  return run::load_trained_model(result["model"].as<std::string>(), applied.device);
}

void check_written(std::ostream& out, const std::string& what) {
  out.flush();
  if (!out) throw Error(what + ": write error (" + std::strerror(errno != 0 ? errno : EIO) + ")");
}

}  // namespace luong::cli
