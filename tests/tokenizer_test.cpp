#include <gtest/gtest.h>

#include <filesystem>

#include "luong/data_pipeline/corpus.h"
#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "test_paths.h"

namespace luong::data {
namespace {

using Tokens = std::vector<std::string>;

// Expected tokens printed by Python: re.findall(r"[\w']+|[^\w\s]", text.lower()).
TEST(WordTokenizerTest, MatchesThePythonRegexOnEnglish) {
  WordTokenizer tokenizer;
  EXPECT_EQ(tokenizer.encode("Don't go!"), (Tokens{"don't", "go", "!"}));
  EXPECT_EQ(tokenizer.encode("x_y, z\u2010w"), (Tokens{"x_y", ",", "z", "\u2010", "w"}));
  EXPECT_EQ(tokenizer.encode("  \t "), Tokens{});
}

TEST(WordTokenizerTest, MatchesThePythonRegexOnUnicode) {
  WordTokenizer tokenizer;
  // Python's \w excludes combining marks, so Arabic diacritics (tanwin here) are tokens of their own.
  EXPECT_EQ(tokenizer.encode("مرحبًا."), (Tokens{"مرحب", "ً", "ا", "."}));
  EXPECT_EQ(tokenizer.encode("علينا عمل هذا"), (Tokens{"علينا", "عمل", "هذا"}));
  // Full lower-casing: U+0130 becomes i + U+0307.
  EXPECT_EQ(tokenizer.encode("İstanbul ÉTÉ 3.5km"),
            (Tokens{"i", "\u0307", "stanbul", "été", "3", ".", "5km"}));
}

TEST(WordTokenizerTest, InvalidUtf8NeverThrows) {
  WordTokenizer tokenizer;
  EXPECT_EQ(tokenizer.encode("a\xFF" "b"), (Tokens{"a", "\uFFFD", "b"}));
}

TEST(WordTokenizerTest, DecodeDetokenises) {
  WordTokenizer tokenizer;
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("We have to do this by ourselves .")), "we have to do this by ourselves.");
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("one two three")), "one two three");
}

TEST(SentencePieceTokenizerTest, TrainsOnTheSharedCorpusAndRoundTrips) {
  if (!std::filesystem::exists(test::shared_corpus())) GTEST_SKIP() << "shared corpus not present";
  if (std::string why; !SentencePieceTokenizer::available(&why)) GTEST_SKIP() << why;
  const auto pairs = read_tsv(test::shared_corpus());
  std::vector<std::string> arabic;
  for (std::size_t i = 0; i < 3000 && i < pairs.size(); ++i) arabic.push_back(pairs[i].target);
  const auto dir = std::filesystem::temp_directory_path() / "luong_spm_test";
  std::filesystem::create_directories(dir);
  const std::string prefix = (dir / "spm.tgt").string();
  SentencePieceTrainOptions options;
  options.vocab_size = 500;
  SentencePieceTokenizer::train(arabic, prefix, options);
  SentencePieceTokenizer tokenizer(prefix + ".model");
  EXPECT_EQ(tokenizer.kind(), "spm");
  for (const std::string& sentence : {arabic[5], arabic[100], std::string("علينا عمل هذا بأنفسنا.")}) {
    const auto pieces = tokenizer.encode(sentence);
    EXPECT_FALSE(pieces.empty());
    EXPECT_EQ(tokenizer.decode(pieces), sentence);
  }
  luong::remove_tree(dir);
}

TEST(SentencePieceTokenizerTest, ErrorsAreClear) {
  EXPECT_THROW(SentencePieceTokenizer("/nonexistent.model"), DataError);
  EXPECT_THROW(SentencePieceTokenizer::train({}, "/tmp/x", {}), DataError);
  EXPECT_THROW(load_tokenizer(TokenizerKind::kSpm, "/nonexistent.model"), DataError);
  EXPECT_THROW(options::parse_enum<TokenizerKind>("bpe-ish"), Error);
}

}  // namespace
}  // namespace luong::data
