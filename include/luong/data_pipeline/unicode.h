#pragma once
// The Unicode character classes of Python's `re` and str.lower(), generated from Python itself
// (scripts/gen_unicode_tables.py) so that tokenisation matches the notebook exactly.
#include <string>

namespace luong::data {

/// Python's `\w` on str: str.isalnum() or '_' (letters, digits and numerics of every script).
bool is_word_char(char32_t cp);
/// Python's `\s` on str: str.isspace().
bool is_space_char(char32_t cp);
/// Appends Python's full lower-case mapping of `cp` (one to three code points).
void append_lower(std::u32string& out, char32_t cp);

}  // namespace luong::data
