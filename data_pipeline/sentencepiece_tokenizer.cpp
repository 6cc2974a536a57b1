#include "luong/data_pipeline/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "luong/data_pipeline/utf8.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/module_path.h"
#include "sentencepiece_shim/sentencepiece_shim.h"

#ifndef LUONG_SHIM_INSTALL_DIR
#define LUONG_SHIM_INSTALL_DIR "/usr/local/lib"
#endif

namespace luong::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kShimName = "libluong_sentencepiece.so";

struct Shim {
  decltype(&luong_spm_train) train = nullptr;
  decltype(&luong_spm_load) load = nullptr;
  decltype(&luong_spm_unload) unload = nullptr;
  decltype(&luong_spm_encode) encode = nullptr;
  decltype(&luong_spm_decode) decode = nullptr;
  decltype(&luong_spm_free) free = nullptr;
};

const Shim& shim() {
  static Shim loaded;
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
#if defined(__SANITIZE_ADDRESS__)
    // ASan aborts on RTLD_DEEPBIND (google/sanitizers#611), and without it the shim's protobuf
    // clashes with LibTorch's.
    failure = "not available in AddressSanitizer builds (its RTLD_DEEPBIND isolation is incompatible with ASan)";
    return;
#endif
    void* handle = open_module(kShimName, "LUONG_SENTENCEPIECE_SHIM", LUONG_SHIM_INSTALL_DIR,
                               RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND, failure);
    if (handle == nullptr) return;
    const auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (fn == nullptr && failure.empty()) failure = std::string(kShimName) + " lacks " + name;
    };
    resolve(loaded.train, "luong_spm_train");
    resolve(loaded.load, "luong_spm_load");
    resolve(loaded.unload, "luong_spm_unload");
    resolve(loaded.encode, "luong_spm_encode");
    resolve(loaded.decode, "luong_spm_decode");
    resolve(loaded.free, "luong_spm_free");
  });
  if (!failure.empty()) throw Error("sentencepiece: " + failure);
  return loaded;
}

}  // namespace

bool SentencePieceTokenizer::available(std::string* why) {
  try {
    shim();
    return true;
  } catch (const Error& e) {
    if (why != nullptr) *why = e.what();
    return false;
  }
}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path) : model_path_(model_path) {
  const std::string bytes = read_tokenizer_file(model_path, "sentencepiece model");
  char error[512] = "";
  processor_ = shim().load(bytes.data(), bytes.size(), error, sizeof error);
  if (processor_ == nullptr) throw DataError("sentencepiece: loading " + printable(model_path) + ": " + printable(error));
}

SentencePieceTokenizer::~SentencePieceTokenizer() {
  if (processor_ != nullptr) shim().unload(processor_);
}

void SentencePieceTokenizer::train(const std::vector<std::string>& sentences, const std::string& model_prefix,
                                   const SentencePieceTrainOptions& options) {
  if (sentences.empty()) throw DataError("sentencepiece: no training sentences");
  const std::vector<std::pair<std::string, std::string>> args = {
      {"model_prefix", model_prefix},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options::enum_name(options.model_type)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"input_sentence_size", std::to_string(sentences.size())},
      {"seed_sentencepiece_size", std::to_string(options.seed_sentencepiece_size)},
      {"hard_vocab_limit", "false"},
      // The vocabulary adds <pad>/<sos>/<eos>/<unk> itself; sentencepiece keeps only <unk>.
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      {"unk_id", "0"},
      {"minloglevel", "2"},
  };
  std::vector<const char*> keys, values, texts;
  for (const auto& [k, v] : args) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  std::vector<std::string> clean;
  clean.reserve(sentences.size());
  for (const auto& s : sentences) clean.push_back(sanitize_utf8(s));
  for (const auto& s : clean) texts.push_back(s.c_str());
  char error[512] = "";
  if (shim().train(texts.data(), texts.size(), keys.data(), values.data(), keys.size(), error, sizeof error) != 0) {
    throw DataError("sentencepiece: training " + model_prefix + ": " + error);
  }
}

std::vector<std::string> SentencePieceTokenizer::encode(std::string_view text) const {
  const std::string clean = sanitize_utf8(text);
  char* buffer = nullptr;
  std::size_t size = 0;
  char error[512] = "";
  if (shim().encode(processor_, clean.data(), clean.size(), &buffer, &size, error, sizeof error) != 0) {
    throw DataError("sentencepiece: encoding with " + model_path_ + ": " + error);
  }
  std::vector<std::string> pieces;
  for (std::size_t start = 0; start < size;) {
    const std::size_t length = std::strlen(buffer + start);
    pieces.emplace_back(buffer + start, length);
    start += length + 1;
  }
  shim().free(buffer);
  return pieces;
}

std::string SentencePieceTokenizer::decode(const std::vector<std::string>& tokens) const {
  std::string joined;
  for (const auto& token : tokens) {
    joined += token;
    joined.push_back('\0');
  }
  char* buffer = nullptr;
  std::size_t size = 0;
  char error[512] = "";
  if (shim().decode(processor_, joined.data(), joined.size(), &buffer, &size, error, sizeof error) != 0) {
    throw DataError("sentencepiece: decoding with " + model_path_ + ": " + error);
  }
  std::string text(buffer, size);
  shim().free(buffer);
  return text;
}

}  // namespace luong::data
