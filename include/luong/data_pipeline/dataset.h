#pragma once
// Filtering, de-duplication and the seeded train/test/dev split of the notebook's data_pipeline.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "luong/data_pipeline/corpus.h"

namespace luong::data {

class Tokenizer;
class Vocabulary;

struct DatasetOptions {
  /// Pairs whose source or target has more than this many word tokens (or none) are dropped.
  std::size_t max_len = 12;
  std::size_t train_size = 3000;  ///< 0: every pair that the test and dev splits leave
  std::size_t test_size = 300;
  /// Taken after the test split, so train and test match the reference for any dev size.
  std::size_t dev_size = 0;
  std::uint64_t seed = 0;
  /// Drop pairs whose (source, target) text repeats an earlier pair.
  bool deduplicate = false;
};

/// A pair after filtering: the raw text (for sentencepiece and BLEU references) and its line.
struct FilteredPair {
  std::string source;
  std::string target;
  std::size_t line = 0;
};

struct DataSplits {
  std::vector<FilteredPair> train;
  std::vector<FilteredPair> dev;
  std::vector<FilteredPair> test;
  std::size_t read = 0;      ///< pairs in the corpus
  std::size_t filtered = 0;  ///< pairs passing the length filter (and de-duplication)
};

/// Filters by word-token length (the notebook's tokenizer, whatever tokenizer trains the model),
/// shuffles with CPython's `random.Random(seed).shuffle` and slices train, test, dev in that order,
/// exactly as seq2seq_reference.py. Throws DataError when nothing survives the filter. Splits are
/// smaller than asked when the corpus is short (train first, then test, then dev).
DataSplits split_corpus(const std::vector<SentencePair>& pairs, const DatasetOptions& options);

/// A pair as ids: `source` ends with <eos> (the notebook's encode_source); `target` holds the bare
/// target ids, to which batching adds <sos> (decoder input) and <eos> (decoder target).
struct EncodedPair {
  std::vector<std::int64_t> source;
  std::vector<std::int64_t> target;
  std::size_t line = 0;
};

/// The source's ids, reversed when `reverse` (Luong et al.'s source reversal), then <eos>.
std::vector<std::int64_t> encode_source(const std::vector<std::string>& tokens, const Vocabulary& vocabulary,
                                        bool reverse = false);

/// Each side cut to its first `max_tokens` tokens (before any reversal), counting the pairs cut in
/// `*cut` when given.
std::vector<EncodedPair> encode_pairs(const std::vector<FilteredPair>& pairs, const Tokenizer& source_tokenizer,
                                      const Tokenizer& target_tokenizer, const Vocabulary& source_vocabulary,
                                      const Vocabulary& target_vocabulary, bool reverse_source = false,
                                      std::size_t max_tokens = SIZE_MAX, std::size_t* cut = nullptr);

}  // namespace luong::data
