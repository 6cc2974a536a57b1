#pragma once
// Reading lines with a bound on their length, so that a file without newlines (/dev/zero, a binary
// file) costs at most the bound in memory.
#include <cstddef>
#include <istream>
#include <string>

namespace luong {

/// The longest line luong reads from a corpus or from stdin.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;

enum class LineStatus {
  kLine,     ///< `line` holds the next line, without its '\n' (and without a trailing '\r')
  kTooLong,  ///< the line is longer than the limit: `line` is empty and the rest of the line unread
  kEnd,      ///< no more input
};

LineStatus read_line(std::istream& in, std::string& line, std::size_t limit = kMaxLineBytes);

/// Reads and drops the rest of the current line (after kTooLong), in constant memory.
void skip_line(std::istream& in);

}  // namespace luong
