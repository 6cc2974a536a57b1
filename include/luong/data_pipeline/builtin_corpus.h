#pragma once
// A parallel corpus generated in code, so that `luong train` always has data: English number words
// and the same numbers in Eastern Arabic digits, one digit per token ("three hundred forty-two"
// -> "٣ ٤ ٢"). Learning it needs attention that walks the source monotonically.
#include <vector>

#include "luong/data_pipeline/corpus.h"

namespace luong::data {

/// "builtin:numbers": every number from 0 to `count - 1` (at most 1,000,000), line = number + 1.
std::vector<SentencePair> builtin_numbers_corpus(int count = 10000);

/// English words for 0 <= n < 1,000,000 ("nine thousand nine hundred ninety-nine").
std::string number_to_english(int n);
/// Eastern Arabic digits separated by spaces.
std::string number_to_arabic_digits(int n);

}  // namespace luong::data
