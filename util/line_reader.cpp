#include "luong/util/line_reader.h"

namespace luong {

LineStatus read_line(std::istream& in, std::string& line, std::size_t limit) {
  line.clear();
  std::streambuf* buffer = in.rdbuf();
  bool any = false;
  while (true) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      if (!any) return LineStatus::kEnd;
      break;
    }
    any = true;
    if (c == '\n') break;
    if (line.size() >= limit) {
      line.clear();
      line.shrink_to_fit();
      return LineStatus::kTooLong;
    }
    line.push_back(static_cast<char>(c));
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return LineStatus::kLine;
}

void skip_line(std::istream& in) {
  std::streambuf* buffer = in.rdbuf();
  for (int c = buffer->sbumpc(); c != '\n'; c = buffer->sbumpc()) {
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return;
    }
  }
}

}  // namespace luong
