// The OPUS two-file reader: the input is the English file, a NUL byte, then the Arabic file.
#include <sstream>

#include "fuzz_target.h"
#include "luong/data_pipeline/corpus.h"
#include "luong/data_pipeline/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t split = text.find('\0');
  std::istringstream english(text.substr(0, split));
  std::istringstream arabic(split == std::string::npos ? std::string() : text.substr(split + 1));
  luong::fuzz::expect_clean([&] {
    const auto pairs = luong::data::parse_opus(english, "fuzz.en", arabic, "fuzz.ar");
    std::size_t previous = 0;
    for (const auto& pair : pairs) {
      LUONG_FUZZ_CHECK(pair.line > previous);
      previous = pair.line;
      LUONG_FUZZ_CHECK(!luong::data::find_invalid_utf8(pair.source) && !luong::data::find_invalid_utf8(pair.target));
    }
  });
  return 0;
}
