// The notebook's word tokenizer (Python's \w, \s and lower() tables) on arbitrary bytes.
#include "fuzz_target.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/data_pipeline/word_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const luong::data::WordTokenizer tokenizer;
  luong::fuzz::expect_clean([&] {
    const auto tokens = tokenizer.encode(text);
    for (const auto& token : tokens) {
      LUONG_FUZZ_CHECK(!token.empty());
      LUONG_FUZZ_CHECK(!luong::data::find_invalid_utf8(token));
    }
    const std::string joined = tokenizer.decode(tokens);
    LUONG_FUZZ_CHECK(!luong::data::find_invalid_utf8(joined));
    // Tokenising is idempotent on its own output's tokens.
    for (const auto& token : tokens) LUONG_FUZZ_CHECK(tokenizer.encode(token).size() == 1);
  });
  return 0;
}
