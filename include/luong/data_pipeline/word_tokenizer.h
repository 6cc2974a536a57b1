#pragma once
#include "luong/data_pipeline/tokenizer.h"

namespace luong::data {

/// The notebook's tokenizer, re.findall(r"[\w']+|[^\w\s]", text.lower()), with Python's Unicode
/// semantics: runs of letters/digits/apostrophes of any script (Arabic included) form words, every
/// other non-space character is a token of its own. Invalid UTF-8 bytes become U+FFFD.
class WordTokenizer final : public Tokenizer {
 public:
  std::vector<std::string> encode(std::string_view text) const override;
  /// Tokens joined by single spaces.
  std::string decode(const std::vector<std::string>& tokens) const override;
  std::string kind() const override { return "word"; }
};

}  // namespace luong::data
