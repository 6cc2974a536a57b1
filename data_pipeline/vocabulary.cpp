#include "luong/data_pipeline/vocabulary.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

#include "luong/data_pipeline/tokenizer.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong::data {
namespace {
const std::vector<std::string> kSpecials = {"<pad>", "<sos>", "<eos>", "<unk>"};
}

Vocabulary::Vocabulary(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  index_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i) index_.emplace(tokens_[i], static_cast<std::int64_t>(i));
}

Vocabulary Vocabulary::build(const std::vector<std::vector<std::string>>& sentences,
                             const VocabularyOptions& options) {
  std::map<std::string, std::size_t> counts;  // std::string order is code-point order for UTF-8
  for (const auto& sentence : sentences) {
    for (const auto& token : sentence) ++counts[token];
  }
  for (const auto& special : kSpecials) counts.erase(special);

  std::vector<std::pair<std::string, std::size_t>> kept;
  for (auto& [token, count] : counts) {
    if (count >= options.min_frequency) kept.emplace_back(token, count);
  }
  if (options.max_size > 0) {
    const std::size_t room = options.max_size > kSpecials.size() ? options.max_size - kSpecials.size() : 0;
    if (kept.size() > room) {
      std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
      kept.resize(room);
      std::sort(kept.begin(), kept.end());
    }
  }
  std::vector<std::string> tokens = kSpecials;
  for (auto& entry : kept) tokens.push_back(std::move(entry.first));
  return Vocabulary(std::move(tokens));
}

Vocabulary Vocabulary::load(const std::string& path) {
  std::istringstream in(read_tokenizer_file(path, "vocabulary file"));
  return parse(in, path);
}

Vocabulary Vocabulary::parse(std::istream& in, const std::string& path) {
  std::vector<std::string> tokens;
  std::unordered_map<std::string, std::size_t> seen;
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t line_number = tokens.size() + 1;
    const std::string where = printable(path) + ":" + std::to_string(line_number) + ": ";
    if (find_invalid_utf8(line)) throw DataError(where + "invalid UTF-8 in vocabulary");
    if (line.empty()) throw DataError(where + "empty token in vocabulary");
    if (line.find_first_of("\r\t") != std::string::npos) throw DataError(where + "tab or CR in vocabulary token");
    if (tokens.size() < kSpecials.size() && line != kSpecials[tokens.size()]) {
      throw DataError(where + "expected special token " + kSpecials[tokens.size()]);
    }
    if (!seen.emplace(line, line_number).second) {
      throw DataError(where + "duplicate token (first on line " + std::to_string(seen[line]) + ")");
    }
    tokens.push_back(line);
  }
  if (tokens.size() < kSpecials.size()) throw DataError(printable(path) + ": vocabulary is empty or truncated");
  return Vocabulary(std::move(tokens));
}

void Vocabulary::save(const std::string& path) const {
  write_file_atomically(path, [&](std::ostream& out) {
    for (const auto& token : tokens_) out << token << '\n';
  });
}

std::int64_t Vocabulary::id(const std::string& token) const {
  const auto it = index_.find(token);
  return it == index_.end() ? kUnk : it->second;
}

const std::string& Vocabulary::token(std::int64_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) {
    throw std::out_of_range("token id " + std::to_string(id) + " outside vocabulary of " +
                            std::to_string(tokens_.size()));
  }
  return tokens_[static_cast<std::size_t>(id)];
}

std::vector<std::int64_t> Vocabulary::encode(const std::vector<std::string>& tokens) const {
  std::vector<std::int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& token : tokens) ids.push_back(id(token));
  return ids;
}

std::vector<std::string> Vocabulary::decode(const std::vector<std::int64_t>& ids) const {
  std::vector<std::string> out;
  for (std::int64_t id : ids) {
    if (id == kEos) break;
    if (id == kPad || id == kSos) continue;
    out.push_back(token(id));
  }
  return out;
}

}  // namespace luong::data
