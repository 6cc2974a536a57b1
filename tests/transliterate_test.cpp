#include "luong/data_pipeline/transliterate.h"

#include <gtest/gtest.h>

namespace luong::data {
namespace {

TEST(TransliterateTest, BuckwalterDigitsAndFallbacks) {
  EXPECT_EQ(transliterate("مرحبا"), "mrHbA");
  EXPECT_EQ(transliterate("بِسْمِ"), "bisomi");
  EXPECT_EQ(transliterate("٣ ٤ ٢؟"), "3 4 2?");
  EXPECT_EQ(transliterate("<eos> don't"), "<eos> don't");
  EXPECT_EQ(transliterate("é"), "U+00E9");
  EXPECT_EQ(transliterate("a\xFF"), "aU+FFFD");
}

}  // namespace
}  // namespace luong::data
