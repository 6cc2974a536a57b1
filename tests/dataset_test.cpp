#include "luong/data_pipeline/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "luong/data_pipeline/vocabulary.h"
#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/util/error.h"
#include "test_paths.h"

namespace luong::data {
namespace {

std::vector<SentencePair> numbered_pairs(int n) {
  std::vector<SentencePair> pairs;
  for (int i = 0; i < n; ++i) pairs.push_back({"sentence " + std::to_string(i), "جملة " + std::to_string(i), std::size_t(i + 1)});
  return pairs;
}

TEST(DatasetTest, SplitSizesAndDeterminism) {
  DatasetOptions options;
  options.train_size = 50;
  options.test_size = 20;
  options.dev_size = 10;
  const auto a = split_corpus(numbered_pairs(100), options);
  EXPECT_EQ(a.train.size(), 50u);
  EXPECT_EQ(a.test.size(), 20u);
  EXPECT_EQ(a.dev.size(), 10u);
  const auto b = split_corpus(numbered_pairs(100), options);
  EXPECT_EQ(a.train.front().line, b.train.front().line);
  EXPECT_EQ(a.test.back().line, b.test.back().line);
  options.seed = 1;
  const auto c = split_corpus(numbered_pairs(100), options);
  EXPECT_NE(a.train.front().line, c.train.front().line);
}

TEST(DatasetTest, ShortCorpusFillsTrainFirst) {
  DatasetOptions options;
  options.train_size = 8;
  options.test_size = 5;
  const auto s = split_corpus(numbered_pairs(10), options);
  EXPECT_EQ(s.train.size(), 8u);
  EXPECT_EQ(s.test.size(), 2u);
}

TEST(DatasetTest, TrainSizeZeroTakesWhatTestAndDevLeave) {
  DatasetOptions options;
  options.train_size = 0;
  options.test_size = 20;
  options.dev_size = 10;
  const auto all = split_corpus(numbered_pairs(100), options);
  EXPECT_EQ(all.train.size(), 70u);
  EXPECT_EQ(all.test.size(), 20u);
  EXPECT_EQ(all.dev.size(), 10u);
  // The same shuffle as a sized split: the first 70 training pairs are the same pairs.
  options.train_size = 70;
  const auto sized = split_corpus(numbered_pairs(100), options);
  for (std::size_t i = 0; i < 70; ++i) EXPECT_EQ(all.train[i].line, sized.train[i].line);
  EXPECT_EQ(all.dev.back().line, sized.dev.back().line);
  options.train_size = 0;
  EXPECT_THROW(split_corpus(numbered_pairs(30), options), DataError);
}

TEST(DatasetTest, LengthFilterAndDeduplication) {
  std::vector<SentencePair> pairs = {{"a b c", "x", 1}, {"a", "x y", 2}, {"a", "x y", 3}, {"!", "", 4}};
  DatasetOptions options;
  options.max_len = 2;
  EXPECT_EQ(split_corpus(pairs, options).filtered, 2u);
  options.deduplicate = true;
  EXPECT_EQ(split_corpus(pairs, options).filtered, 1u);
  options.max_len = 0;
  EXPECT_THROW(split_corpus(pairs, options), DataError);
}

// Expected values from the Python reference: seq2seq_reference.load_pairs(path, 12, 3000, 300, 0)
// and build_vocab on its training split.
TEST(DatasetTest, SameSplitAndVocabularyAsThePythonReference) {
  if (!std::filesystem::exists(test::shared_corpus())) GTEST_SKIP() << "shared corpus not present";
  const auto splits = split_corpus(read_tsv(test::shared_corpus()), DatasetOptions{});
  ASSERT_EQ(splits.train.size(), 3000u);
  ASSERT_EQ(splits.test.size(), 300u);
  WordTokenizer words;
  EXPECT_EQ(words.encode(splits.train[0].source),
            (std::vector<std::string>{"how", "long", "are", "you", "here", "for", "?"}));
  EXPECT_EQ(words.encode(splits.train[2999].target),
            (std::vector<std::string>{"فقط", "أخبرني", "ماذا", "تريد", "."}));
  EXPECT_EQ(words.encode(splits.test[0].target),
            (std::vector<std::string>{"يقول", "توم", "بأنه", "ليس", "هو", "من", "كسر", "النافذة"}));
  std::vector<std::vector<std::string>> source, target;
  for (const auto& pair : splits.train) {
    source.push_back(words.encode(pair.source));
    target.push_back(words.encode(pair.target));
  }
  EXPECT_EQ(Vocabulary::build(source).size(), 2293u);
  EXPECT_EQ(Vocabulary::build(target).size(), 4642u);
}

TEST(DatasetTest, EncodeSourceEndsWithEos) {
  const auto vocab = Vocabulary::build({{"a", "b"}});
  EXPECT_EQ(encode_source({"b", "zz"}, vocab), (std::vector<std::int64_t>{5, Vocabulary::kUnk, Vocabulary::kEos}));
}

}  // namespace
}  // namespace luong::data
