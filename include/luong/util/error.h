#pragma once
// Errors that reach the user as one line and a non-zero exit status.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace luong {

/// Bad input from the user: a missing file, a malformed line, a bad option. The CLI prints
/// `luong: <what>` and exits with status 2.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A problem with a corpus, vocabulary or tokenizer file; the message names file and line.
class DataError : public Error {
 public:
  using Error::Error;
};

/// A corrupt, truncated or mismatched checkpoint.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// `text` from a file, or a path, fit for a one-line message: control bytes as \xNN; past `limit`
/// bytes its beginning and its end around "...", cut between UTF-8 characters, so that a long path
/// keeps its file name.
inline std::string printable(std::string_view text, std::size_t limit = 80) {
  const auto escaped = [](std::string_view part) {
    std::string out;
    for (const char c : part) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte == 0x7f) {
        char code[8];
        std::snprintf(code, sizeof code, "\\x%02x", byte);
        out += code;
      } else {
        out += c;
      }
    }
    return out;
  };
  if (text.size() <= limit) return escaped(text);
  const auto continues = [&](std::size_t at) { return (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80; };
  std::size_t head_end = limit / 2, tail_begin = text.size() - (limit - limit / 2);
  while (head_end > 0 && continues(head_end)) --head_end;
  while (tail_begin < text.size() && continues(tail_begin)) ++tail_begin;
  return escaped(text.substr(0, head_end)) + "..." + escaped(text.substr(tail_begin));
}

}  // namespace luong
