#include "sentencepiece_shim.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

void set_error(char* error, size_t size, const std::string& message) {
  if (error == nullptr || size == 0) return;
  std::strncpy(error, message.c_str(), size - 1);
  error[size - 1] = '\0';
}

class ArraySentenceIterator final : public sentencepiece::SentenceIterator {
 public:
  ArraySentenceIterator(const char* const* sentences, size_t count) : sentences_(sentences), count_(count) {
    if (count_ > 0) value_ = sentences_[0];
  }
  bool done() const override { return index_ >= count_; }
  void Next() override {
    if (++index_ < count_) value_ = sentences_[index_];
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const char* const* sentences_;
  size_t count_;
  size_t index_ = 0;
  std::string value_;
};

char* copy_out(const std::string& bytes, size_t* size) {
  char* out = static_cast<char*>(std::malloc(bytes.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, bytes.data(), bytes.size());
  out[bytes.size()] = '\0';
  *size = bytes.size();
  return out;
}

}  // namespace

extern "C" {

int luong_spm_train(const char* const* sentences, size_t count, const char* const* keys, const char* const* values,
                    size_t arguments, char* error, size_t error_size) {
  try {
    std::unordered_map<std::string, std::string> args;
    for (size_t i = 0; i < arguments; ++i) args[keys[i]] = values[i];
    ArraySentenceIterator iterator(sentences, count);
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &iterator);
    if (!status.ok()) {
      set_error(error, error_size, status.ToString());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
    return 1;
  }
}

void* luong_spm_load(const char* bytes, size_t size, char* error, size_t error_size) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  const auto status = processor->LoadFromSerializedProto(absl::string_view(bytes, size));
  if (!status.ok()) {
    set_error(error, error_size, status.ToString());
    delete processor;
    return nullptr;
  }
  return processor;
}

void luong_spm_unload(void* processor) { delete static_cast<sentencepiece::SentencePieceProcessor*>(processor); }

int luong_spm_encode(void* processor, const char* text, size_t text_size, char** pieces, size_t* size, char* error,
                     size_t error_size) {
  std::vector<std::string> out;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(processor)->Encode(std::string(text, text_size), &out);
  if (!status.ok()) {
    set_error(error, error_size, status.ToString());
    return 1;
  }
  std::string joined;
  for (const auto& piece : out) {
    joined += piece;
    joined.push_back('\0');
  }
  *pieces = copy_out(joined, size);
  return *pieces == nullptr;
}

int luong_spm_decode(void* processor, const char* pieces, size_t size, char** text, size_t* text_size, char* error,
                     size_t error_size) {
  std::vector<std::string> in;
  for (size_t start = 0; start < size;) {
    const size_t length = std::strlen(pieces + start);
    in.emplace_back(pieces + start, length);
    start += length + 1;
  }
  std::string out;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(processor)->Decode(in, &out);
  if (!status.ok()) {
    set_error(error, error_size, status.ToString());
    return 1;
  }
  *text = copy_out(out, text_size);
  return *text == nullptr;
}

void luong_spm_free(void* buffer) { std::free(buffer); }

}  // extern "C"
