#include "luong/data_pipeline/vocabulary.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "luong/util/error.h"

namespace luong::data {
namespace {

using Sentences = std::vector<std::vector<std::string>>;

TEST(VocabularyTest, SpecialsFirstThenSortedTokens) {
  const auto vocab = Vocabulary::build(Sentences{{"b", "a", "ب"}, {"a", "c"}});
  EXPECT_EQ(vocab.tokens(), (std::vector<std::string>{"<pad>", "<sos>", "<eos>", "<unk>", "a", "b", "c", "ب"}));
  EXPECT_EQ(vocab.id("a"), 4);
  EXPECT_EQ(vocab.id("never seen"), Vocabulary::kUnk);
  EXPECT_EQ(vocab.token(7), "ب");
  EXPECT_THROW(vocab.token(8), std::out_of_range);
}

TEST(VocabularyTest, MinFrequencyAndMaxSize) {
  const Sentences s{{"a", "a", "a", "b", "b", "c"}};
  EXPECT_EQ(Vocabulary::build(s, {2, 0}).size(), 6u);                 // a, b
  const auto capped = Vocabulary::build(s, {1, 5});                    // specials + 1
  EXPECT_EQ(capped.size(), 5u);
  EXPECT_EQ(capped.token(4), "a");
}

TEST(VocabularyTest, EncodeDecode) {
  const auto vocab = Vocabulary::build(Sentences{{"x", "y"}});
  EXPECT_EQ(vocab.encode({"y", "z"}), (std::vector<std::int64_t>{5, Vocabulary::kUnk}));
  EXPECT_EQ(vocab.decode({Vocabulary::kSos, 4, Vocabulary::kUnk, Vocabulary::kEos, 5}),
            (std::vector<std::string>{"x", "<unk>"}));
}

TEST(VocabularyTest, SaveLoadRoundTrip) {
  const auto vocab = Vocabulary::build(Sentences{{"hello", "مرحبا", "don't"}});
  const auto path = (std::filesystem::temp_directory_path() / "luong_vocab_test.txt").string();
  vocab.save(path);
  EXPECT_EQ(Vocabulary::load(path), vocab);
  std::filesystem::remove(path);
}

TEST(VocabularyTest, MalformedFilesAreRejected) {
  const auto path = (std::filesystem::temp_directory_path() / "luong_vocab_bad.txt").string();
  const auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  write("<pad>\n<sos>\n<eos>\n<unk>\na\na\n");
  EXPECT_THROW(Vocabulary::load(path), DataError);  // duplicate
  write("a\n<sos>\n<eos>\n<unk>\n");
  EXPECT_THROW(Vocabulary::load(path), DataError);  // specials not first
  write("<pad>\n<sos>\n");
  EXPECT_THROW(Vocabulary::load(path), DataError);  // truncated
  write("<pad>\n<sos>\n<eos>\n<unk>\n\xFF\n");
  EXPECT_THROW(Vocabulary::load(path), DataError);  // invalid UTF-8
  std::filesystem::remove(path);
  EXPECT_THROW(Vocabulary::load(path), DataError);  // missing
}

}  // namespace
}  // namespace luong::data
