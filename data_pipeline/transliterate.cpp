#include "luong/data_pipeline/transliterate.h"

#include <cstdio>
#include <map>

#include "luong/data_pipeline/utf8.h"

namespace luong::data {

std::string transliterate(const std::string& utf8) {
  // Buckwalter's scheme: one ASCII character per Arabic letter or diacritic, reversible.
  static const std::map<char32_t, char> kBuckwalter = {
      {0x0621, '\''}, {0x0622, '|'}, {0x0623, '>'}, {0x0624, '&'}, {0x0625, '<'}, {0x0626, '}'}, {0x0627, 'A'},
      {0x0628, 'b'},  {0x0629, 'p'}, {0x062A, 't'}, {0x062B, 'v'}, {0x062C, 'j'}, {0x062D, 'H'}, {0x062E, 'x'},
      {0x062F, 'd'},  {0x0630, '*'}, {0x0631, 'r'}, {0x0632, 'z'}, {0x0633, 's'}, {0x0634, '$'}, {0x0635, 'S'},
      {0x0636, 'D'},  {0x0637, 'T'}, {0x0638, 'Z'}, {0x0639, 'E'}, {0x063A, 'g'}, {0x0640, '_'}, {0x0641, 'f'},
      {0x0642, 'q'},  {0x0643, 'k'}, {0x0644, 'l'}, {0x0645, 'm'}, {0x0646, 'n'}, {0x0647, 'h'}, {0x0648, 'w'},
      {0x0649, 'Y'},  {0x064A, 'y'}, {0x064B, 'F'}, {0x064C, 'N'}, {0x064D, 'K'}, {0x064E, 'a'}, {0x064F, 'u'},
      {0x0650, 'i'},  {0x0651, '~'}, {0x0652, 'o'}, {0x0670, '`'}, {0x0671, '{'}, {0x061F, '?'}, {0x060C, ','},
      {0x061B, ';'}};
  std::string out;
  for (const char32_t cp : decode_utf8(utf8)) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (const auto it = kBuckwalter.find(cp); it != kBuckwalter.end()) {
      out.push_back(it->second);
    } else if (cp >= 0x0660 && cp <= 0x0669) {
      out.push_back(static_cast<char>('0' + (cp - 0x0660)));  // Arabic-Indic digits
    } else {
      char buffer[16];
      std::snprintf(buffer, sizeof buffer, "U+%04X", static_cast<unsigned>(cp));
      out += buffer;
    }
  }
  return out;
}

}  // namespace luong::data
