#pragma once
// Raw sentences in, detokenised translations out: tokenisation, vocabulary lookup, batching and
// search around a trained model.
#include <string>
#include <vector>

#include "luong/evaluation/search.h"
#include "luong/training/run_directory.h"

namespace luong::evaluation {

struct Translation {
  std::vector<std::string> source_tokens;  ///< as the encoder saw them, <eos> last
  std::vector<std::string> target_tokens;  ///< produced tokens (<unk> visible)
  std::string text;                        ///< detokenised target
  Hypothesis hypothesis;
};

class Translator {
 public:
  explicit Translator(training::TrainedModel& trained) : trained_(trained) {}

  /// Translates `sentences` in batches of `batch_size` sentences of similar length (results in input
  /// order); an empty (or all-whitespace) sentence gives
  /// an empty translation. Sources longer than `max_source_tokens` are cut there.
  std::vector<Translation> translate(const std::vector<std::string>& sentences, const SearchOptions& options,
                                     int batch_size = 64, int max_source_tokens = 400);

 private:
  training::TrainedModel& trained_;
};

}  // namespace luong::evaluation
