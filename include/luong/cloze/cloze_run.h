#pragma once
// The seed notebook's whole run: corpus, training, display sentence, CSVs and preview PNG.
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "luong/cloze/cloze_head.h"
#include "luong/util/options.h"

namespace luong::cloze {

enum class ClozeInit {
  kNumpy,  ///< the seed's np.random.seed(seed) + randn draws
  kTorch,  ///< LibTorch's generator (ClozeRunOptions::torch_randn)
};

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_CLOZE_OPTIONS(X)                                                                                \
  X(std::int64_t, updates, 4000, "epochs", "cloze", "full-corpus Adam updates",                                \
    ::luong::options::closed(1, 1e7), kMayChange)                                                             \
  X(std::string, out_dir, ".", "out", "cloze", "directory for attention_loss.csv, attention_weights.csv, attention.png", \
    ::luong::options::kAnyValue, kMayChange)                                                                  \
  X(ClozeInit, init, ClozeInit::kNumpy, "init", "cloze", "initial weights", ::luong::options::kAnyValue,        \
    kMayChange)                                                                                               \
  X(std::int64_t, seed, 0, "seed", "cloze", "random seed", ::luong::options::closed(0, 4294967295.0),           \
    kMayChange)                                                                                               \
  X(std::int64_t, threads, 0, "threads", "cloze", "threads for the sentences of an update (0 = all cores)",     \
    ::luong::options::closed(0, 1024), kMayChange)

struct ClozeRunOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_CLOZE_OPTIONS)
  /// Standard normal draws from LibTorch's generator (count, seed) -> values; needed for init torch.
  /// A hook, so that this library (and `luong cloze`) runs without loading LibTorch.
  std::function<std::vector<double>(std::size_t, unsigned)> torch_randn;
};

struct ClozeRunReport {
  std::vector<std::pair<int, double>> loss_curve;
  std::vector<double> display_attention;  ///< [12 x 12] row-major
  double train_seconds = 0;
  double gflop = 0;  ///< floating-point operations of the training run, counted from the shapes
};

/// Prints the seed's `[B-...]` lines to `out` and writes the three files. Throws luong::Error.
ClozeRunReport run_cloze(const ClozeRunOptions& options, std::ostream& out);

/// FLOPs of one sentence's forward + backward with n tokens (multiply-adds count 2).
double cloze_sentence_flops(const ClozeDims& dims, int n);

}  // namespace luong::cloze

template <>
struct luong::options::EnumNames<luong::cloze::ClozeInit> {
  static constexpr std::pair<luong::cloze::ClozeInit, const char*> values[] = {{luong::cloze::ClozeInit::kNumpy, "numpy"},
                                                                             {luong::cloze::ClozeInit::kTorch, "torch"}};
};
