#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/model_commands.h"
#include "luong/cli/option_flags.h"
#include "luong/cloze/cloze_autograd.h"
#include "luong/cloze/numpy_random.h"
#include "luong/util/error.h"

namespace luong::cli {
namespace {

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_GRADCHECK_OPTIONS(X)                                                                          \
  X(std::int64_t, sentences, 20, "sentences", "gradcheck", "random sentences to check",                      \
    ::luong::options::closed(1, 100000), kMayChange)                                                        \
  X(std::int64_t, seed, 1, "seed", "gradcheck", "random seed", ::luong::options::closed(0, 4294967295.0),    \
    kMayChange)                                                                                             \
  X(double, tolerance, 1e-10, "tolerance", "gradcheck", "largest acceptable relative difference",            \
    ::luong::options::left_open(0, 1), kMayChange)

struct GradcheckOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_GRADCHECK_OPTIONS)
};

}  // namespace

int gradcheck_command(int argc, char** argv) {
  cxxopts::Options parser("luong gradcheck",
                          "Compare the cloze head's hand-written gradients (the reference layers and the numpy-exact "
                          "kernels) with LibTorch autograd, in double precision, for every parameter.");
  add_flags(parser, GradcheckOptions{});
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  GradcheckOptions options;
  apply_flags(result, options);

  // Random parameters (scale 0.5 so that attention is far from uniform) and random sentences of 2-20
  // tokens drawn from a 98-token vocabulary, so tokens repeat within a sentence.
  cloze::ClozeDims dims;
  cloze::ClozeParameters params(dims);
  cloze::NumpyRandom rng(static_cast<unsigned>(options.seed));
  for (double& v : params.data) v = 0.5 * rng.gauss();
  double worst = 0;
  std::printf("%-8s %-11s %-6s %-14s %-14s\n", "sentence", "kernels", "param", "max |diff|", "max rel diff");
  for (std::int64_t s = 0; s < options.sentences; ++s) {
    const int n = 2 + static_cast<int>(std::abs(rng.gauss()) * 6) % 19;
    std::vector<int> idx(static_cast<std::size_t>(n));
    for (int& token : idx) token = static_cast<int>(std::abs(rng.gauss()) * 30) % dims.vocab;
    if (s == 0) idx = {3, 5, 3, 3, 7, 5};  // repeated tokens exercise the embedding scatter-add
    for (const auto kernels : {cloze::ClozeKernels::kReference, cloze::ClozeKernels::kNumpyExact}) {
      for (const auto& diff : cloze::compare_gradients(kernels, params, idx)) {
        std::printf("%-8lld %-11s %-6s %-14.3e %-14.3e\n", static_cast<long long>(s),
                    kernels == cloze::ClozeKernels::kReference ? "reference" : "numpy-exact", diff.name, diff.max_abs,
                    diff.max_rel);
        worst = std::max(worst, diff.max_rel);
      }
    }
  }
  std::printf("worst relative difference %.3e (tolerance %.1e): %s\n", worst, options.tolerance,
              worst <= options.tolerance ? "ok" : "FAILED");
  check_written(std::cout, "stdout");
  return worst <= options.tolerance ? 0 : 3;
}

}  // namespace luong::cli
