#include <optional>

#include "luong/data_pipeline/tokenizer.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong::data {

std::string read_tokenizer_file(const std::string& path, const std::string& what) {
  std::optional<std::string> text;
  try {
    text = read_text_file(path, kMaxTokenizerFileBytes, "a " + what);
  } catch (const Error& e) {
    throw DataError(e.what());
  }
  if (!text) throw DataError(printable(path) + ": no such " + what);
  return std::move(*text);
}

}  // namespace luong::data
