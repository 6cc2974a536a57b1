#include <algorithm>
#include <cmath>
#include <cstdio>

#include "luong/cli/commands.h"
#include "luong/cli/options.h"
#include "luong/cloze/cloze_autograd.h"
#include "luong/cloze/numpy_random.h"
#include "luong/util/error.h"

namespace luong::cli {

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
