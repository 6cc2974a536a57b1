#include "luong/data_pipeline/tokenizer.h"

#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/word_tokenizer.h"

namespace luong::data {

std::unique_ptr<Tokenizer> load_tokenizer(TokenizerKind kind, const std::string& model_path) {
  if (kind == TokenizerKind::kSpm) return std::make_unique<SentencePieceTokenizer>(model_path);
  return std::make_unique<WordTokenizer>();
}

}  // namespace luong::data
