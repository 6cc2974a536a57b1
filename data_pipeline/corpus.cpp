#include "luong/data_pipeline/corpus.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "luong/data_pipeline/utf8.h"
#include "luong/util/error.h"
#include "luong/util/line_reader.h"

namespace luong::data {
namespace fs = std::filesystem;
namespace {

// More pairs than this is not a corpus this tool can train on in memory; it is refused while reading.
constexpr std::size_t kMaxPairs = 20'000'000;

std::ifstream open_or_throw(const std::string& path) {
  if (!fs::exists(path)) throw DataError(printable(path) + ": no such file");
  if (fs::is_directory(path)) throw DataError(printable(path) + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(printable(path) + ": cannot open for reading");
  return in;
}

std::string location(const std::string& path, std::size_t line) {
  return printable(path) + ":" + std::to_string(line) + ": ";
}

// The next line into `line`; false at the end. A line over kMaxLineBytes, or one line too many, is an error.
bool next_line(std::istream& in, const std::string& path, std::size_t line_number, std::string& line) {
  switch (read_line(in, line)) {
    case LineStatus::kEnd: return false;
    case LineStatus::kTooLong:
      throw DataError(location(path, line_number) + "line longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB");
    case LineStatus::kLine: break;
  }
  if (line_number > kMaxPairs) {
    throw DataError(printable(path) + ": more than " + std::to_string(kMaxPairs) + " lines; luong reads at most that many");
  }
  return true;
}

void check_utf8(const std::string& path, std::size_t line_number, const std::string& line) {
  if (const auto bad = find_invalid_utf8(line)) {
    throw DataError(location(path, line_number) + "invalid UTF-8 at byte " + std::to_string(*bad + 1));
  }
}

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; }

std::vector<std::string> read_lines(std::istream& in, const std::string& path) {
  std::vector<std::string> lines;
  std::string line;
  while (next_line(in, path, lines.size() + 1, line)) {
    check_utf8(path, lines.size() + 1, line);
    lines.push_back(std::move(line));
  }
  if (in.bad()) throw DataError(printable(path) + ": read error");
  return lines;
}

}  // namespace

std::vector<SentencePair> read_tsv(const std::string& path, bool reverse) {
  std::ifstream in = open_or_throw(path);
  return parse_tsv(in, path, reverse);
}

std::vector<SentencePair> parse_tsv(std::istream& in, const std::string& path, bool reverse) {
  std::vector<SentencePair> pairs;
  std::string line;
  std::size_t line_number = 0;
  while (next_line(in, path, line_number + 1, line)) {
    ++line_number;
    if (line.empty()) continue;
    check_utf8(path, line_number, line);
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      throw DataError(location(path, line_number) + "expected english<TAB>arabic, found no tab");
    }
    const std::size_t second_tab = line.find('\t', tab + 1);
    std::string english = line.substr(0, tab);
    std::string arabic = line.substr(tab + 1, second_tab == std::string::npos ? std::string::npos
                                                                               : second_tab - tab - 1);
    if (is_blank(english) || is_blank(arabic)) {
      throw DataError(location(path, line_number) + "empty " + (is_blank(english) ? "first" : "second") +
                      " column");
    }
    SentencePair pair{std::move(english), std::move(arabic), line_number};
    if (reverse) std::swap(pair.source, pair.target);
    pairs.push_back(std::move(pair));
  }
  if (in.bad()) throw DataError(printable(path) + ": read error");
  return pairs;
}

std::vector<SentencePair> read_opus(const std::string& english_path, const std::string& arabic_path,
                                    bool reverse) {
  std::ifstream english = open_or_throw(english_path);
  std::ifstream arabic = open_or_throw(arabic_path);
  return parse_opus(english, english_path, arabic, arabic_path, reverse);
}

std::vector<SentencePair> parse_opus(std::istream& english_lines, const std::string& english_path,
                                     std::istream& arabic_lines, const std::string& arabic_path, bool reverse) {
  const std::vector<std::string> english = read_lines(english_lines, english_path);
  const std::vector<std::string> arabic = read_lines(arabic_lines, arabic_path);
  if (english.size() != arabic.size()) {
    throw DataError(printable(english_path) + " has " + std::to_string(english.size()) + " lines but " + printable(arabic_path) +
                    " has " + std::to_string(arabic.size()) + "; OPUS files must be line-aligned");
  }
  std::vector<SentencePair> pairs;
  pairs.reserve(english.size());
  for (std::size_t i = 0; i < english.size(); ++i) {
    // OPUS-100 has a few empty lines on one side; they carry no pair, like the notebook's filter.
    if (is_blank(english[i]) || is_blank(arabic[i])) continue;
    SentencePair pair{english[i], arabic[i], i + 1};
    if (reverse) std::swap(pair.source, pair.target);
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

std::vector<SentencePair> read_corpus(const CorpusSpec& spec) {
  std::vector<SentencePair> pairs;
  if (spec.format == CorpusFormat::kTsv) {
    pairs = read_tsv(spec.path, spec.reverse);
  } else {
    std::string english;
    std::string arabic;
    if (fs::is_directory(spec.path)) {
      std::vector<fs::path> english_files;
      for (const auto& entry : fs::directory_iterator(spec.path)) {
        if (entry.path().extension() == ".en") english_files.push_back(entry.path());
      }
      std::sort(english_files.begin(), english_files.end());
      // Prefer the training file of an OPUS-100 release directory.
      for (const auto& candidate : english_files) {
        fs::path ar = candidate;
        ar.replace_extension(".ar");
        if (!fs::exists(ar)) continue;
        const bool is_train = candidate.filename().string().find("train") != std::string::npos;
        if (english.empty() || is_train) {
          english = candidate.string();
          arabic = ar.string();
        }
        if (is_train) break;
      }
      if (english.empty()) throw DataError(printable(spec.path) + ": no pair of *.en / *.ar files in this directory");
    } else {
      english = spec.path + ".en";
      arabic = spec.path + ".ar";
    }
    pairs = read_opus(english, arabic, spec.reverse);
  }
  if (pairs.empty()) throw DataError(printable(spec.path) + ": the corpus holds no sentence pairs");
  return pairs;
}

std::string corpus_digest(const std::vector<SentencePair>& pairs) {
  std::uint64_t hash = 14695981039346656037ULL;
  const auto add = [&](std::string_view bytes) {
    for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  };
  for (const SentencePair& pair : pairs) {
    add(pair.source);
    add("\t");
    add(pair.target);
    add("\t" + std::to_string(pair.line) + "\n");
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace luong::data
