#pragma once
// Corpus BLEU and chrF with sacreBLEU's defaults, so the numbers match `sacrebleu` on the same
// detokenised text: BLEU with the 13a tokenizer, 4-grams, brevity penalty and 'exp' smoothing;
// chrF with character 6-grams, beta 2, whitespace ignored.
#include <array>
#include <string>
#include <vector>

namespace luong::evaluation {

/// sacreBLEU's 13a tokenisation (mteval-v13a): punctuation split off, '.' and ',' kept inside
/// numbers, '-' split after digits.
std::vector<std::string> tokenize_13a(const std::string& line);

struct BleuScore {
  double score = 0;                     ///< 0..100
  std::array<double, 4> precisions{};   ///< percent, after smoothing
  std::array<long, 4> matches{};
  std::array<long, 4> totals{};
  double brevity_penalty = 0;
  long hypothesis_length = 0;
  long reference_length = 0;
};

/// Corpus BLEU of hypotheses against one reference each. Throws luong::Error on a length mismatch.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

/// Corpus chrF (0..100): n-gram statistics summed over sentences, precision and recall averaged
/// over the orders present, then F_beta.
double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

/// The sacreBLEU version these implementations are held to (tests/sacrebleu_test.cpp runs it).
inline constexpr const char* kSacrebleuVersion = "2.6.0";
/// sacreBLEU's signature of the settings above, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0".
std::string bleu_signature();
/// "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
std::string chrf_signature();

}  // namespace luong::evaluation
