#include "luong/data_pipeline/builtin_corpus.h"

#include <string>

#include "luong/data_pipeline/utf8.h"
#include "luong/util/error.h"

namespace luong::data {
namespace {

const char* const kOnes[] = {"zero",    "one",     "two",       "three",    "four",     "five",    "six",
                             "seven",   "eight",   "nine",      "ten",      "eleven",   "twelve",  "thirteen",
                             "fourteen", "fifteen", "sixteen",  "seventeen", "eighteen", "nineteen"};
const char* const kTens[] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};

std::string below_thousand(int n) {
  std::string out;
  if (n >= 100) {
    out = std::string(kOnes[n / 100]) + " hundred";
    n %= 100;
    if (n == 0) return out;
    out += " ";
  }
  if (n < 20) return out + kOnes[n];
  out += kTens[n / 10];
  if (n % 10 != 0) out += std::string("-") + kOnes[n % 10];
  return out;
}

}  // namespace

std::string number_to_english(int n) {
  if (n < 0 || n >= 1000000) throw Error("number out of range for the built-in corpus");
  if (n < 1000) return below_thousand(n);
  std::string out = below_thousand(n / 1000) + " thousand";
  if (n % 1000 != 0) out += " " + below_thousand(n % 1000);
  return out;
}

std::string number_to_arabic_digits(int n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (char d : digits) {
    if (!out.empty()) out.push_back(' ');
    append_utf8(out, static_cast<char32_t>(0x0660 + (d - '0')));
  }
  return out;
}

std::vector<SentencePair> builtin_numbers_corpus(int count) {
  if (count < 1 || count > 1000000) throw Error("built-in corpus size must be in [1, 1000000]");
  std::vector<SentencePair> pairs;
  pairs.reserve(static_cast<std::size_t>(count));
  for (int n = 0; n < count; ++n) {
    pairs.push_back({number_to_english(n), number_to_arabic_digits(n), static_cast<std::size_t>(n) + 1});
  }
  return pairs;
}

}  // namespace luong::data
