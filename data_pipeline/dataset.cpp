#include "luong/data_pipeline/dataset.h"

#include <algorithm>
#include <set>

#include "luong/data_pipeline/python_random.h"
#include "luong/data_pipeline/tokenizer.h"
#include "luong/data_pipeline/vocabulary.h"
#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/util/error.h"

namespace luong::data {

DataSplits split_corpus(const std::vector<SentencePair>& pairs, const DatasetOptions& options) {
  const WordTokenizer words;
  DataSplits splits;
  splits.read = pairs.size();
  std::vector<FilteredPair> kept;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& pair : pairs) {
    const std::size_t source_length = words.encode(pair.source).size();
    const std::size_t target_length = words.encode(pair.target).size();
    if (source_length == 0 || target_length == 0) continue;
    if (source_length > options.max_len || target_length > options.max_len) continue;
    if (options.deduplicate && !seen.emplace(pair.source, pair.target).second) continue;
    kept.push_back({pair.source, pair.target, pair.line});
  }
  splits.filtered = kept.size();
  if (kept.empty()) {
    throw DataError("no sentence pair has between 1 and " + std::to_string(options.max_len) +
                    " tokens on both sides (of " + std::to_string(pairs.size()) + " read); raise --max-len");
  }
  PythonRandom(options.seed).shuffle(kept);

  const auto take = [&](std::size_t& begin, std::size_t count) {
    const std::size_t end = std::min(kept.size(), begin + count);
    std::vector<FilteredPair> part(kept.begin() + static_cast<std::ptrdiff_t>(begin),
                                   kept.begin() + static_cast<std::ptrdiff_t>(end));
    begin = end;
    return part;
  };
  std::size_t cursor = 0;
  std::size_t train_size = options.train_size;
  if (train_size == 0) {
    const std::size_t held_out = options.test_size + options.dev_size;
    if (kept.size() <= held_out) {
      throw DataError(std::to_string(kept.size()) + " sentence pairs pass the filter: none is left for training after " +
                      std::to_string(options.test_size) + " test and " + std::to_string(options.dev_size) + " dev pairs");
    }
    train_size = kept.size() - held_out;
  }
  // Train first, then test, then dev: the notebook's order, so its splits stay the same.
  splits.train = take(cursor, train_size);
  splits.test = take(cursor, options.test_size);
  splits.dev = take(cursor, options.dev_size);
  return splits;
}

std::vector<std::int64_t> encode_source(const std::vector<std::string>& tokens, const Vocabulary& vocabulary,
                                        bool reverse) {
  std::vector<std::int64_t> ids = vocabulary.encode(tokens);
  if (reverse) std::reverse(ids.begin(), ids.end());
  ids.push_back(Vocabulary::kEos);
  return ids;
}

std::vector<EncodedPair> encode_pairs(const std::vector<FilteredPair>& pairs, const Tokenizer& source_tokenizer,
                                      const Tokenizer& target_tokenizer, const Vocabulary& source_vocabulary,
                                      const Vocabulary& target_vocabulary, bool reverse_source, std::size_t max_tokens,
                                      std::size_t* cut) {
  std::vector<EncodedPair> encoded;
  encoded.reserve(pairs.size());
  for (const auto& pair : pairs) {
    std::vector<std::string> source = source_tokenizer.encode(pair.source);
    std::vector<std::string> target = target_tokenizer.encode(pair.target);
    if (source.size() > max_tokens || target.size() > max_tokens) {
      source.resize(std::min(source.size(), max_tokens));
      target.resize(std::min(target.size(), max_tokens));
      if (cut != nullptr) ++*cut;
    }
    encoded.push_back({encode_source(source, source_vocabulary, reverse_source), target_vocabulary.encode(target), pair.line});
  }
  return encoded;
}

}  // namespace luong::data
