// The Tatoeba/Anki TSV reader on arbitrary bytes.
#include <sstream>

#include "fuzz_target.h"
#include "luong/data_pipeline/corpus.h"
#include "luong/data_pipeline/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  luong::fuzz::expect_clean([&] {
    std::istringstream in(text);
    const auto pairs = luong::data::parse_tsv(in, "fuzz.tsv", size % 2 == 1);
    std::size_t previous = 0;
    for (const auto& pair : pairs) {
      LUONG_FUZZ_CHECK(pair.line > previous);
      previous = pair.line;
      LUONG_FUZZ_CHECK(!pair.source.empty() && !pair.target.empty());
      LUONG_FUZZ_CHECK(!luong::data::find_invalid_utf8(pair.source) && !luong::data::find_invalid_utf8(pair.target));
      LUONG_FUZZ_CHECK(pair.source.find('\t') == std::string::npos && pair.target.find('\t') == std::string::npos);
    }
  });
  return 0;
}
