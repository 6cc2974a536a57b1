#include "luong/data_pipeline/tokenizer.h"

#include <filesystem>

#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/word_tokenizer.h"

namespace luong::data {

std::unique_ptr<Tokenizer> load_tokenizer(TokenizerKind kind, const std::string& model_path,
                                          const std::string& truecase_path) {
  if (kind == TokenizerKind::kSpm) return std::make_unique<SentencePieceTokenizer>(model_path);
  if (!truecase_path.empty() && std::filesystem::exists(truecase_path)) {
    return std::make_unique<WordTokenizer>(std::make_shared<const Truecaser>(Truecaser::load(truecase_path)));
  }
  return std::make_unique<WordTokenizer>();
}

}  // namespace luong::data
