#pragma once
#include <memory>
#include <string>
#include <unordered_map>

#include "luong/data_pipeline/tokenizer.h"

namespace luong::data {

/// The casing each lower-cased word takes most often inside the training targets (sentence-initial
/// words not counted), so that output like "tom is here ." comes out as "Tom is here.".
class Truecaser {
 public:
  /// Counts surface forms over `sentences` (raw text).
  static Truecaser build(const std::vector<std::string>& sentences);
  /// `lower<TAB>surface` per line, for the words whose usual form is not all lower case.
  void save(const std::string& path) const;
  static Truecaser load(const std::string& path);
  /// The usual surface form of a lower-cased token (the token itself when unknown).
  std::string apply(const std::string& token) const;
  std::size_t size() const { return forms_.size(); }

 private:
  std::unordered_map<std::string, std::string> forms_;
};

/// The notebook's tokenizer, re.findall(r"[\w']+|[^\w\s]", text.lower()), with Python's Unicode
/// semantics: runs of letters/digits/apostrophes of any script (Arabic included) form words, every
/// other non-space character is a token of its own. Invalid UTF-8 bytes become U+FFFD. Decoding
/// detokenises (punctuation attached as written, numbers joined) and, with a Truecaser, restores
/// the usual casing and capitalises the sentence's first letter.
class WordTokenizer final : public Tokenizer {
 public:
  explicit WordTokenizer(std::shared_ptr<const Truecaser> truecaser = nullptr) : truecaser_(std::move(truecaser)) {}
  std::vector<std::string> encode(std::string_view text) const override;
  std::string decode(const std::vector<std::string>& tokens) const override;
  std::string kind() const override { return "word"; }

  /// The tokens of `text` as encode() splits it, in their original case.
  static std::vector<std::string> surface_tokens(std::string_view text);

 private:
  std::shared_ptr<const Truecaser> truecaser_;
};

}  // namespace luong::data
