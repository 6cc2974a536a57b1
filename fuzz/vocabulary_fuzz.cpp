// Vocabulary files (one token per line, specials first).
#include <sstream>

#include "fuzz_target.h"
#include "luong/data_pipeline/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  luong::fuzz::expect_clean([&] {
    std::istringstream in(text);
    const auto vocabulary = luong::data::Vocabulary::parse(in, "fuzz.vocab");
    LUONG_FUZZ_CHECK(vocabulary.size() >= 4);
    for (std::size_t i = 0; i < vocabulary.size(); ++i) {
      const auto id = static_cast<std::int64_t>(i);
      LUONG_FUZZ_CHECK(vocabulary.id(vocabulary.token(id)) == id);
    }
  });
  return 0;
}
