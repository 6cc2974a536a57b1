#pragma once
#include <string>

namespace luong::data {

/// ASCII for plot labels: Arabic letters in Buckwalter transliteration, Arabic-Indic digits as ASCII
/// digits, other non-ASCII code points as U+XXXX (invalid UTF-8 as U+FFFD).
std::string transliterate(const std::string& utf8);

}  // namespace luong::data
