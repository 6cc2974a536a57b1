#pragma once
// Raw sentences in, detokenised translations out: tokenisation, vocabulary lookup, batching, search
// (one model or an ensemble) and <unk> replacement around trained models.
#include <string>
#include <unordered_map>
#include <vector>

#include "luong/evaluation/search.h"
#include "luong/run/run_directory.h"

namespace luong::evaluation {

struct Translation {
  std::vector<std::string> source_tokens;  ///< as the encoder saw them (reversed with --reverse-source), <eos> last
  std::vector<std::string> target_tokens;  ///< the best hypothesis's tokens (<unk> visible unless replaced)
  std::string text;                        ///< the best hypothesis, detokenised
  Hypothesis hypothesis;                   ///< the best
  std::vector<std::string> nbest_texts;    ///< every hypothesis of options.nbest, best first
  std::vector<Hypothesis> nbest;
};

/// The most tokens of a sentence that translate, evaluate and trace read: a source is cut there, and
/// evaluate cuts both sides of a pair (an attention over 20,000 words would take gigabytes).
inline constexpr int kMaxSentenceTokens = 400;

class Translator {
 public:
  /// One model, or an ensemble: its members must share tokenizers and vocabularies (the same data
  /// preparation: other seeds, checkpoints of one run), and the first one's are used.
  explicit Translator(std::vector<run::TrainedModel*> models);
  explicit Translator(run::TrainedModel& model) : Translator(std::vector<run::TrainedModel*>{&model}) {}

  /// Translates `sentences` in batches of options.batch sentences of similar length (results in
  /// input order); an empty (or all-whitespace) sentence gives an empty translation. Sources longer
  /// than `max_source_tokens` are cut there. With options.unk_replace each <unk> becomes the source
  /// token it attends to most, or that token's entry in options.dictionary.
  std::vector<Translation> translate(const std::vector<std::string>& sentences, const SearchOptions& options,
                                     int max_source_tokens = kMaxSentenceTokens);

 private:
  std::string replace_unknowns(std::vector<std::string>& tokens, const Hypothesis& hypothesis,
                               const std::vector<std::string>& source_words) const;
  void load_dictionary(const std::string& path);

  std::vector<run::TrainedModel*> models_;
  std::unordered_map<std::string, std::string> dictionary_;
  std::string dictionary_path_;
};

}  // namespace luong::evaluation
