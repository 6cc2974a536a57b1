#include "luong/data_pipeline/word_tokenizer.h"

#include <map>
#include <sstream>

#include "luong/data_pipeline/unicode.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/line_reader.h"

namespace luong::data {
namespace {

// re.findall(r"[\w']+|[^\w\s]") over code points.
std::vector<std::string> split(const std::u32string& text) {
  std::vector<std::string> tokens;
  std::string word;
  const auto flush_word = [&] {
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
  };
  for (char32_t cp : text) {
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

std::string lower(const std::string& token) {
  std::u32string lowered;
  for (char32_t cp : decode_utf8(token)) append_lower(lowered, cp);
  return encode_utf8(lowered);
}

bool one_of(const std::string& token, std::initializer_list<const char*> set) {
  for (const char* s : set) {
    if (token == s) return true;
  }
  return false;
}

bool is_number(const std::string& token) {
  return !token.empty() && token.find_first_not_of("0123456789") == std::string::npos;
}

// Whether no space goes between `previous` and `next` in running text.
bool attached(const std::string& previous, const std::string& next, bool inside_quote) {
  if (one_of(next, {".", ",", "!", "?", ";", ":", ")", "]", "}", "%", "…", "؟", "،", "؛", "»", "”", "’"})) return true;
  if (one_of(previous, {"(", "[", "{", "«", "“", "‘", "¿", "¡", "$", "-"}) || one_of(next, {"-"})) return true;
  if (next == "\"") return inside_quote;     // a closing quote
  if (previous == "\"") return inside_quote;  // after an opening quote
  return false;
}

}  // namespace

std::vector<std::string> WordTokenizer::encode(std::string_view text) const {
  std::u32string lowered;
  for (char32_t cp : decode_utf8(text)) append_lower(lowered, cp);
  return split(lowered);
}

std::vector<std::string> WordTokenizer::surface_tokens(std::string_view text) { return split(decode_utf8(text)); }

std::string WordTokenizer::decode(const std::vector<std::string>& tokens) const {
  std::string out;
  bool inside_quote = false;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string token = truecaser_ ? truecaser_->apply(tokens[i]) : tokens[i];
    if (i > 0) {
      // "3 . 5", "10 : 30", "1 , 000" were one number.
      const bool in_number = i + 1 < tokens.size() && is_number(tokens[i - 1]) && is_number(tokens[i + 1]) &&
                             one_of(token, {".", ",", ":"});
      const bool after_number_mark = i >= 2 && is_number(tokens[i - 2]) && is_number(token) &&
                                     one_of(tokens[i - 1], {".", ",", ":"});
      if (!in_number && !after_number_mark && !attached(tokens[i - 1], token, inside_quote)) out.push_back(' ');
    }
    if (token == "\"") inside_quote = !inside_quote;
    out += token;
  }
  // The first letter of the sentence, if it is a Latin one, in capitals.
  if (truecaser_) {
    for (char& c : out) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if ((c >= 'A' && c <= 'Z') || static_cast<unsigned char>(c) >= 0x80) break;
    }
  }
  return out;
}

Truecaser Truecaser::build(const std::vector<std::string>& sentences) {
  std::unordered_map<std::string, std::map<std::string, std::size_t>> counts;
  for (const auto& sentence : sentences) {
    const std::vector<std::string> tokens = WordTokenizer::surface_tokens(sentence);
    for (std::size_t i = 1; i < tokens.size(); ++i) ++counts[lower(tokens[i])][tokens[i]];
  }
  Truecaser out;
  for (const auto& [key, forms] : counts) {
    const auto best = std::max_element(forms.begin(), forms.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best->first != key) out.forms_.emplace(key, best->first);
  }
  return out;
}

void Truecaser::save(const std::string& path) const {
  std::map<std::string, std::string> sorted(forms_.begin(), forms_.end());
  write_file_atomically(path, [&](std::ostream& out) {
    for (const auto& [key, form] : sorted) out << key << '\t' << form << '\n';
  });
}

Truecaser Truecaser::load(const std::string& path) {
  std::istringstream in(read_tokenizer_file(path, "truecaser"));
  Truecaser out;
  std::string line;
  for (std::size_t number = 1; read_line(in, line) != LineStatus::kEnd; ++number) {
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos || find_invalid_utf8(line)) {
      throw DataError(printable(path) + ":" + std::to_string(number) + ": expected lower<TAB>surface");
    }
    out.forms_.emplace(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

std::string Truecaser::apply(const std::string& token) const {
  const auto it = forms_.find(token);
  return it == forms_.end() ? token : it->second;
}

}  // namespace luong::data
