#include "luong/data_pipeline/unicode.h"

#include <algorithm>
#include <iterator>

namespace luong::data {
namespace {

struct CodepointRange {
  char32_t first;
  char32_t last;
};
struct LowerMapping {
  char32_t from;
  char32_t to[3];
};

#include "unicode_tables.inc"

template <std::size_t N>
bool in_ranges(const CodepointRange (&ranges)[N], char32_t cp) {
  const auto it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                   [](char32_t c, const CodepointRange& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

}  // namespace

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_';
  }
  return in_ranges(kWordRanges, cp);
}

bool is_space_char(char32_t cp) { return in_ranges(kSpaceRanges, cp); }

void append_lower(std::u32string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  const auto it = std::lower_bound(std::begin(kLowerMappings), std::end(kLowerMappings), cp,
                                   [](const LowerMapping& m, char32_t c) { return m.from < c; });
  if (it == std::end(kLowerMappings) || it->from != cp) {
    out.push_back(cp);
    return;
  }
  for (char32_t c : it->to) {
    if (c != 0) out.push_back(c);
  }
}

}  // namespace luong::data
