#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/options.h"
#include "luong/cloze/cloze_autograd.h"
#include "luong/cloze/cloze_run.h"
#include "luong/cloze/numpy_random.h"
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
  cloze::run_cloze(run, std::cout);
  return 0;
}

int gradcheck_command(int argc, char** argv) {
  cxxopts::Options options("luong gradcheck", "Compare the cloze head's hand-written gradients with LibTorch "
                                              "autograd, in double precision, for every parameter.");
  options.add_options()
      ("sentences", "random sentences to check", cxxopts::value<int>()->default_value("20"))
      ("seed", "random seed", cxxopts::value<unsigned>()->default_value("1"))
      ("tolerance", "largest acceptable relative difference", cxxopts::value<double>()->default_value("1e-10"));
  cxxopts::ParseResult result;
  if (!parse_or_help(options, argc, argv, result)) return 0;
  const int count = result["sentences"].as<int>();
  const double tolerance = result["tolerance"].as<double>();
  if (count < 1) throw Error("--sentences must be at least 1");

  // Random parameters (scale 0.5 so that attention is far from uniform) and random sentences of 2-20
  // tokens drawn from a 98-token vocabulary, so tokens repeat within a sentence.
  cloze::ClozeDims dims;
  cloze::ClozeParameters params(dims);
  cloze::NumpyRandom rng(result["seed"].as<unsigned>());
  for (double& v : params.data) v = 0.5 * rng.gauss();
  double worst = 0;
  std::printf("%-8s %-6s %-14s %-14s\n", "sentence", "param", "max |diff|", "max rel diff");
  for (int s = 0; s < count; ++s) {
    const int n = 2 + static_cast<int>(std::abs(rng.gauss()) * 6) % 19;
    std::vector<int> idx(static_cast<std::size_t>(n));
    for (int& token : idx) token = static_cast<int>(std::abs(rng.gauss()) * 30) % dims.vocab;
    if (s == 0) idx = {3, 5, 3, 3, 7, 5};  // repeated tokens exercise the embedding scatter-add
    for (const auto& diff : cloze::compare_gradients(params, idx)) {
      std::printf("%-8d %-6s %-14.3e %-14.3e\n", s, diff.name, diff.max_abs, diff.max_rel);
      worst = std::max(worst, diff.max_rel);
    }
  }
  std::printf("worst relative difference %.3e (tolerance %.1e): %s\n", worst, tolerance, worst <= tolerance ? "ok" : "FAILED");
  return worst <= tolerance ? 0 : 3;
}

}  // namespace luong::cli
