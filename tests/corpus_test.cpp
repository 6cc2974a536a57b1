#include "luong/data_pipeline/corpus.h"

#include <gtest/gtest.h>

#include "luong/util/error.h"
#include "test_paths.h"

namespace luong::data {
namespace {

TEST(CorpusTest, ReadsTsvWithArabicAttributionCrLfAndBlankLines) {
  const auto pairs = read_tsv(test::fixture("tiny.tsv"));
  ASSERT_EQ(pairs.size(), 4u);
  EXPECT_EQ(pairs[0].source, "Hi.");
  EXPECT_EQ(pairs[0].target, "مرحبًا.");
  EXPECT_EQ(pairs[1].target, "أحبك.");  // CR stripped
  EXPECT_EQ(pairs[2].line, 4u);         // blank line 3 skipped, numbering kept
  EXPECT_EQ(pairs[3].source, "Don't go!");
}

TEST(CorpusTest, ReverseSwapsSides) {
  const auto pairs = read_tsv(test::fixture("tiny.tsv"), /*reverse=*/true);
  EXPECT_EQ(pairs[0].source, "مرحبًا.");
  EXPECT_EQ(pairs[0].target, "Hi.");
}

TEST(CorpusTest, LineWithoutTabNamesFileAndLine) {
  try {
    read_tsv(test::fixture("no_tab.tsv"));
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no_tab.tsv:2:"), std::string::npos) << e.what();
  }
}

TEST(CorpusTest, InvalidUtf8IsAnError) {
  try {
    read_tsv(test::fixture("bad_utf8.tsv"));
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bad_utf8.tsv:1: invalid UTF-8"), std::string::npos) << e.what();
  }
}

TEST(CorpusTest, MissingFileIsAnError) {
  EXPECT_THROW(read_tsv("/nonexistent/corpus.tsv"), DataError);
  EXPECT_THROW(read_corpus({"/nonexistent/corpus.tsv", CorpusFormat::kTsv, false}), DataError);
}

TEST(CorpusTest, ReadsOpusByPrefixAndByDirectory) {
  const auto by_prefix = read_corpus({test::fixture("opus.ar-en-train"), CorpusFormat::kOpus, false});
  ASSERT_EQ(by_prefix.size(), 3u);  // the pair with an empty English line is dropped
  EXPECT_EQ(by_prefix[0].source, "Hello world.");
  EXPECT_EQ(by_prefix[0].target, "مرحبا بالعالم.");
  EXPECT_EQ(by_prefix[2].line, 4u);
  const auto by_directory = read_corpus({test::fixture(""), CorpusFormat::kOpus, false});
  EXPECT_EQ(by_directory.size(), 3u);
}

TEST(CorpusTest, OpusLineCountMismatchIsAnError) {
  try {
    read_opus(test::fixture("short.en"), test::fixture("short.ar"));
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 lines but"), std::string::npos) << e.what();
  }
}

TEST(CorpusTest, EmptyCorpusIsAnError) {
  EXPECT_THROW(read_corpus({"/dev/null", CorpusFormat::kTsv, false}), DataError);
}

TEST(CorpusTest, FormatNames) {
  EXPECT_EQ(options::parse_enum<CorpusFormat>("tsv"), CorpusFormat::kTsv);
  EXPECT_EQ(options::parse_enum<CorpusFormat>("opus"), CorpusFormat::kOpus);
  EXPECT_THROW(options::parse_enum<CorpusFormat>("csv"), Error);
}

}  // namespace
}  // namespace luong::data
