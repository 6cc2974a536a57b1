#pragma once
// A token <-> id table with the notebook's special tokens first: <pad>=0, <sos>=1, <eos>=2, <unk>=3.
#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <unordered_map>
#include <vector>

namespace luong::data {

struct VocabularyOptions {
  /// Tokens seen fewer times in the training split become <unk>.
  std::size_t min_frequency = 1;
  /// At most this many entries including the four specials (most frequent kept); 0 = unlimited.
  std::size_t max_size = 0;
};

class Vocabulary {
 public:
  static constexpr std::int64_t kPad = 0;
  static constexpr std::int64_t kSos = 1;
  static constexpr std::int64_t kEos = 2;
  static constexpr std::int64_t kUnk = 3;

  /// Specials, then the kept tokens in code-point order: the reference's
  /// `[PAD, SOS, EOS, UNK] + sorted(set(words))` when no limit applies.
  static Vocabulary build(const std::vector<std::vector<std::string>>& sentences,
                          const VocabularyOptions& options = {});

  /// One token per line, in id order. Throws DataError when the file is missing, malformed
  /// (specials not first, duplicates, invalid UTF-8) or empty.
  static Vocabulary load(const std::string& path);
  /// load() on an open stream; `origin` names it in errors.
  static Vocabulary parse(std::istream& in, const std::string& origin);
  /// Written to a temporary file and renamed, so a crash never leaves half a vocabulary.
  void save(const std::string& path) const;

  std::size_t size() const { return tokens_.size(); }
  /// kUnk for tokens not in the table.
  std::int64_t id(const std::string& token) const;
  /// Throws std::out_of_range for ids outside [0, size).
  const std::string& token(std::int64_t id) const;
  const std::vector<std::string>& tokens() const { return tokens_; }

  std::vector<std::int64_t> encode(const std::vector<std::string>& tokens) const;
  /// Stops at <eos>, skips <pad>/<sos>; <unk> stays visible.
  std::vector<std::string> decode(const std::vector<std::int64_t>& ids) const;

  bool operator==(const Vocabulary& other) const { return tokens_ == other.tokens_; }

 private:
  explicit Vocabulary(std::vector<std::string> tokens);
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int64_t> index_;
};

}  // namespace luong::data
