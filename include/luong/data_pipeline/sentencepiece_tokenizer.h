#pragma once
#include <memory>
#include <string>
#include <vector>

#include "luong/data_pipeline/tokenizer.h"

namespace luong::data {

enum class SentencePieceModel { kUnigram, kBpe };

struct SentencePieceTrainOptions {
  int vocab_size = 4000;
  SentencePieceModel model_type = SentencePieceModel::kUnigram;
  double character_coverage = 1.0;
  int seed_sentencepiece_size = 100000;
};

/// Subword tokenisation with sentencepiece, trained with its C++ trainer on the training split.
/// Every sentencepiece status is checked; failures become luong::DataError. sentencepiece runs inside
/// libluong_sentencepiece.so, loaded on first use (see sentencepiece_shim.h for why); it is looked for
/// in $LUONG_SENTENCEPIECE_SHIM, beside the executable, in ../lib, and in the install directory.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  /// Loads a trained `.model` file.
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  /// Trains on `sentences` and writes `<model_prefix>.model` (and `.vocab`). The vocabulary size is
  /// a soft limit so that small corpora still train.
  static void train(const std::vector<std::string>& sentences, const std::string& model_prefix,
                    const SentencePieceTrainOptions& options);

  /// Whether the sentencepiece shim loads here; if not, `why` says why (e.g. an ASan build).
  static bool available(std::string* why = nullptr);

  std::vector<std::string> encode(std::string_view text) const override;
  std::string decode(const std::vector<std::string>& tokens) const override;
  std::string kind() const override { return "spm"; }

 private:
  void* processor_ = nullptr;
  std::string model_path_;
};

}  // namespace luong::data

template <>
struct luong::options::EnumNames<luong::data::SentencePieceModel> {
  static constexpr std::pair<luong::data::SentencePieceModel, const char*> values[] = {
      {luong::data::SentencePieceModel::kUnigram, "unigram"}, {luong::data::SentencePieceModel::kBpe, "bpe"}};
};
