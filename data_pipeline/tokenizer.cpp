#include "luong/data_pipeline/tokenizer.h"

#include <filesystem>
#include <optional>

#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/word_tokenizer.h"
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

std::unique_ptr<Tokenizer> load_tokenizer(TokenizerKind kind, const std::string& model_path,
                                          const std::string& truecase_path) {
  if (kind == TokenizerKind::kSpm) return std::make_unique<SentencePieceTokenizer>(model_path);
  if (!truecase_path.empty() && std::filesystem::exists(truecase_path)) {
    return std::make_unique<WordTokenizer>(std::make_shared<const Truecaser>(Truecaser::load(truecase_path)));
  }
  return std::make_unique<WordTokenizer>();
}

}  // namespace luong::data
