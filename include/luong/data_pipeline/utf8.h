#pragma once
// UTF-8 validation, decoding and encoding (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace luong::data {

/// Byte offset of the first invalid sequence, or nullopt when `text` is valid UTF-8.
std::optional<std::size_t> find_invalid_utf8(std::string_view text);

/// Decodes valid UTF-8 (check with find_invalid_utf8 first); invalid bytes decode to U+FFFD.
std::u32string decode_utf8(std::string_view text);

void append_utf8(std::string& out, char32_t codepoint);
std::string encode_utf8(std::u32string_view text);

/// Drops invalid sequences (replacing each with U+FFFD) so that any byte string can be processed.
std::string sanitize_utf8(std::string_view text);

}  // namespace luong::data
