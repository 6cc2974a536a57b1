#pragma once
// One interface over the notebook's word tokenizer and sentencepiece.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "luong/util/options.h"

namespace luong::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Splits text into tokens (words or sentencepiece pieces). Never throws on any byte string.
  virtual std::vector<std::string> encode(std::string_view text) const = 0;
  /// Joins tokens back into text.
  virtual std::string decode(const std::vector<std::string>& tokens) const = 0;
  /// "word" or "spm": what config.json records.
  virtual std::string kind() const = 0;
};

enum class TokenizerKind { kWord, kSpm };

/// The largest vocabulary, truecaser or sentencepiece model file luong reads (each read whole, and
/// refused past this: /dev/zero or a stray corpus in their place would fill the memory).
inline constexpr std::uint64_t kMaxTokenizerFileBytes = std::uint64_t{64} << 20;

/// Such a file's bytes (read_text_file, at most kMaxTokenizerFileBytes); DataError naming the path
/// where it is missing ("no such <what>"), not a regular file, too large or unreadable.
std::string read_tokenizer_file(const std::string& path, const std::string& what);

/// The tokenizer of a saved run: the word tokenizer (with the truecaser at `truecase_path` when that
/// file exists), or sentencepiece with the model at `model_path`.
std::unique_ptr<Tokenizer> load_tokenizer(TokenizerKind kind, const std::string& model_path = "",
                                          const std::string& truecase_path = "");

}  // namespace luong::data

template <>
struct luong::options::EnumNames<luong::data::TokenizerKind> {
  static constexpr std::pair<luong::data::TokenizerKind, const char*> values[] = {
      {luong::data::TokenizerKind::kWord, "word"}, {luong::data::TokenizerKind::kSpm, "spm"}};
};
