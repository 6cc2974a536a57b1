#pragma once
// Raw sentences in, detokenised translations out: tokenisation, vocabulary lookup, batching and
// search around a trained model.
#include <string>
#include <vector>

#include "luong/evaluation/search.h"
#include "luong/run/run_directory.h"

namespace luong::evaluation {

struct Translation {
  std::vector<std::string> source_tokens;  ///< as the encoder saw them, <eos> last
  std::vector<std::string> target_tokens;  ///< produced tokens (<unk> visible)
  std::string text;                        ///< detokenised target
  Hypothesis hypothesis;
};

class Translator {
 public:
  explicit Translator(run::TrainedModel& trained) : trained_(trained) {}

  /// Translates `sentences` in batches of options.batch sentences of similar length (results in
  /// input order); an empty (or all-whitespace) sentence gives an empty translation. Sources longer
  /// than `max_source_tokens` are cut there.
  std::vector<Translation> translate(const std::vector<std::string>& sentences, const SearchOptions& options,
                                     int max_source_tokens = 400);

 private:
  run::TrainedModel& trained_;
};

}  // namespace luong::evaluation
