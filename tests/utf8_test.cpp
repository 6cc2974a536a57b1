#include "luong/data_pipeline/utf8.h"

#include <gtest/gtest.h>

#include <string>

#include "luong/util/error.h"

namespace luong::data {
namespace {

TEST(Utf8Test, ValidTextHasNoInvalidOffset) {
  EXPECT_FALSE(find_invalid_utf8("plain ascii"));
  EXPECT_FALSE(find_invalid_utf8("عربي"));
  EXPECT_FALSE(find_invalid_utf8("\xF0\x9F\x98\x80"));  // U+1F600
}

TEST(Utf8Test, FindsInvalidSequences) {
  EXPECT_EQ(find_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // > U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xE2\x82"), 0u);          // truncated
}

TEST(Utf8Test, RoundTripAndSanitize) {
  const std::string text = "Hi مرحبا \xF0\x9F\x98\x80";
  EXPECT_EQ(encode_utf8(decode_utf8(text)), text);
  EXPECT_EQ(sanitize_utf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_FALSE(find_invalid_utf8(sanitize_utf8("\xC0\xAF\xED\xA0\x80")));
}

// printable: messages' text and paths. Control bytes escaped; past the limit the beginning and the
// end around "...", so a long path keeps its file name, and the cuts fall between UTF-8 characters.
TEST(PrintableTest, KeepsBothEndsOfLongTextWholeCharacters) {
  EXPECT_EQ(printable("a\tb\x7f"), "a\\x09b\\x7f");
  EXPECT_EQ(printable(std::string(80, 'x')), std::string(80, 'x'));
  const std::string path = "/runs/" + std::string(90, 'd') + "/checkpoint.tmp.123.4/optimizer.pt";
  const std::string shown = printable(path);
  EXPECT_EQ(shown.substr(0, 10), "/runs/dddd");
  EXPECT_EQ(shown.substr(shown.size() - 12), "optimizer.pt");
  EXPECT_NE(shown.find("..."), std::string::npos);
  EXPECT_EQ(shown.size(), 83u);
  std::string arabic;
  for (int i = 0; i < 61; ++i) arabic += "\u0628";  // two bytes each
  const std::string cut = printable(arabic, 41);
  EXPECT_FALSE(find_invalid_utf8(cut)) << cut;
  EXPECT_EQ(cut, std::string(arabic, 0, 20) + "..." + std::string(arabic, arabic.size() - 20));
  EXPECT_EQ(printable("\n" + std::string(100, 'y'), 10).substr(0, 8), "\\x0ayyyy");
}

}  // namespace
}  // namespace luong::data
