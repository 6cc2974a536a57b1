#pragma once
// The seed notebook's whole run: corpus, training, display sentence, CSVs and preview PNG.
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "luong/cloze/cloze_head.h"

namespace luong::cloze {

struct ClozeRunOptions {
  int updates = 4000;
  /// Where attention_loss.csv, attention_weights.csv and attention.png go.
  std::string out_dir = ".";
  /// "numpy": the seed's np.random.seed(0) + randn draws; "torch": `torch_randn` fills the values.
  std::string init = "numpy";
  /// Standard normal draws from LibTorch's generator (count, seed) -> values; needed for init "torch".
  /// A hook, so that this library (and `luong cloze`) runs without loading LibTorch.
  std::function<std::vector<double>(std::size_t, unsigned)> torch_randn;
  unsigned seed = 0;
  /// Threads for the sentences of an update (0 = available cores).
  int threads = 0;
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
