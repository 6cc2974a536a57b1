#pragma once
// Parallel-corpus readers: Tatoeba/Anki TSV and OPUS-100 (Moses) line-aligned files.
#include <cstddef>
#include <istream>
#include <string>
#include <vector>

#include "luong/util/options.h"

namespace luong::data {

/// One sentence pair; `line` is the 1-based line number in the source file(s), kept so that
/// errors and NaN reports can point at the data.
struct SentencePair {
  std::string source;
  std::string target;
  std::size_t line = 0;
};

enum class CorpusFormat { kTsv, kOpus };

struct CorpusSpec {
  /// A TSV file, or for OPUS a directory holding `*.en`/`*.ar` files or the path prefix before
  /// `.en`/`.ar` (e.g. `data/opus.ar-en-train`).
  std::string path;
  CorpusFormat format = CorpusFormat::kTsv;
  /// false: English -> Arabic (the notebook's direction); true: Arabic -> English.
  bool reverse = false;
};


/// `english<TAB>arabic[<TAB>attribution...]` per line; blank lines are skipped, CR-LF accepted.
/// Throws DataError naming file and line for a missing file, a line without a tab, an empty
/// side or invalid UTF-8.
std::vector<SentencePair> read_tsv(const std::string& path, bool reverse = false);
/// read_tsv on an open stream; `origin` names it in errors.
std::vector<SentencePair> parse_tsv(std::istream& in, const std::string& origin, bool reverse = false);

/// Two line-aligned files. Throws DataError on a missing file, different line counts or
/// invalid UTF-8.
std::vector<SentencePair> read_opus(const std::string& english_path, const std::string& arabic_path,
                                    bool reverse = false);
/// read_opus on open streams.
std::vector<SentencePair> parse_opus(std::istream& english, const std::string& english_origin, std::istream& arabic,
                                     const std::string& arabic_origin, bool reverse = false);

/// Dispatches on spec.format, resolving OPUS directories and prefixes. Throws DataError when
/// nothing usable is found or the corpus is empty.
std::vector<SentencePair> read_corpus(const CorpusSpec& spec);

/// 16 hexadecimal digits identifying `pairs` (their sides, line numbers and order: FNV-1a, 64 bits):
/// what a resumed run checks its corpus against, since the split depends on every pair.
std::string corpus_digest(const std::vector<SentencePair>& pairs);

}  // namespace luong::data

template <>
struct luong::options::EnumNames<luong::data::CorpusFormat> {
  static constexpr std::pair<luong::data::CorpusFormat, const char*> values[] = {
      {luong::data::CorpusFormat::kTsv, "tsv"}, {luong::data::CorpusFormat::kOpus, "opus"}};
};
