#include "luong/data_pipeline/tokenizer.h"

#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/util/error.h"

namespace luong::data {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& model_path) {
  if (kind == "word") return std::make_unique<WordTokenizer>();
  if (kind == "spm") return std::make_unique<SentencePieceTokenizer>(model_path);
  throw Error("unknown tokenizer '" + kind + "' (expected word or spm)");
}

}  // namespace luong::data
