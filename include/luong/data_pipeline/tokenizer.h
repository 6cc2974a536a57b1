#pragma once
// One interface over the notebook's word tokenizer and sentencepiece.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

/// The tokenizer of a saved run: "word", or "spm" with the model file at `model_path`.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& model_path = "");

}  // namespace luong::data
