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

/// `text` from a file, fit for a one-line message: control bytes as \xNN, at most `limit` bytes.
inline std::string printable(std::string_view text, std::size_t limit = 80) {
  std::string out;
  for (const char c : text.substr(0, limit)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  if (text.size() > limit) out += "...";
  return out;
}

}  // namespace luong
