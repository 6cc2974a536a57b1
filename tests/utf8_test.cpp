#include "luong/data_pipeline/utf8.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace luong::data
