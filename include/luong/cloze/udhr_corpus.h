#pragma once
// The cloze seed's corpus: sixteen sentences of the Universal Declaration of Human Rights (public
// domain), tokenised as the seed does (`[a-z]+` on lower case), with its sorted vocabulary.
#include <string>
#include <vector>

namespace luong::cloze {

struct ClozeCorpus {
  std::vector<std::vector<std::string>> sentences;  ///< tokens per sentence (>= 2 tokens each)
  std::vector<std::string> vocabulary;              ///< sorted distinct tokens
  std::vector<std::vector<int>> ids;                ///< token ids per sentence

  int id(const std::string& token) const;  ///< -1 when absent
};

/// The seed's CORPUS text, one sentence per line.
const std::string& udhr_text();
/// The seed's display sentence (Article 1): "all human beings are born free and equal in dignity and rights".
const std::vector<std::string>& display_sentence();

/// re.findall(r"[a-z]+", sentence.lower()) for ASCII text.
std::vector<std::string> cloze_tokenize(const std::string& sentence);

/// Sentences with fewer than two tokens are dropped, as in the seed.
ClozeCorpus make_cloze_corpus(const std::string& text = udhr_text());

}  // namespace luong::cloze
