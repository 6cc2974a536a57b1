#include "luong/data_pipeline/word_tokenizer.h"

#include "luong/data_pipeline/unicode.h"
#include "luong/data_pipeline/utf8.h"

namespace luong::data {

std::vector<std::string> WordTokenizer::encode(std::string_view text) const {
  std::u32string lowered;
  for (char32_t cp : decode_utf8(text)) append_lower(lowered, cp);

  std::vector<std::string> tokens;
  std::string word;
  const auto flush_word = [&] {
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
  };
  for (char32_t cp : lowered) {
    if (cp == U'\'' || is_word_char(cp)) {
      append_utf8(word, cp);
      continue;
    }
    flush_word();
    if (!is_space_char(cp)) {
      std::string symbol;
      append_utf8(symbol, cp);
      tokens.push_back(std::move(symbol));
    }
  }
  flush_word();
  return tokens;
}

std::string WordTokenizer::decode(const std::vector<std::string>& tokens) const {
  std::string out;
  for (const auto& token : tokens) {
    if (!out.empty()) out.push_back(' ');
    out += token;
  }
  return out;
}

}  // namespace luong::data
