#include <caffe2/serialize/inline_container.h>

#include <string>

#include "luong/models/state_dict.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "storage_types.h"

namespace luong::models {
namespace {

// ---- a pickle writer for state dicts ---------------------------------------------------------------
// The opcodes Python's torch.save emits for an OrderedDict of tensors, nothing more: LibTorch's own
// pickler tags the dict with torch.jit._pickle.restore_type_tag, which torch.load's default
// weights_only=True refuses.
class StateDictPickler {
 public:
  void proto() { out_ += "\x80\x02"; }
  void stop() { out_ += '.'; }
  void mark() { out_ += '('; }
  void tuple() { out_ += 't'; }
  void reduce() { out_ += 'R'; }
  void set_items() { out_ += 'u'; }
  void persistent_id() { out_ += 'Q'; }
  void boolean(bool value) { out_ += value ? "\x88" : "\x89"; }
  void global(const std::string& module, const std::string& name) { out_ += "c" + module + "\n" + name + "\n"; }
  void string(const std::string& text) {
    out_ += 'X';
    append_le(static_cast<std::uint32_t>(text.size()), 4);
    out_ += text;
  }
  void integer(int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      out_ += 'J';
      append_le(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)), 4);
    } else {
      out_ += "\x8a\x08";  // LONG1, eight bytes two's complement
      append_le(static_cast<std::uint64_t>(value), 8);
    }
  }
  void int_tuple(c10::IntArrayRef values) {
    mark();
    for (const int64_t v : values) integer(v);
    tuple();
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    out_ += ')';
    reduce();
  }
  const std::string& bytes() const { return out_; }

 private:
  void append_le(std::uint64_t value, int count) {
    for (int i = 0; i < count; ++i) out_ += static_cast<char>((value >> (8 * i)) & 0xff);
  }
  std::string out_;
};

const char* storage_name(torch::ScalarType dtype) {
  for (const StorageType& type : kStorageTypes) {
    if (type.dtype == dtype) return type.name;
  }
  throw Error(std::string("state_dict: cannot save tensors of type ") + c10::toString(dtype));
}

}  // namespace

void serialize_state_dict(const StateDict& dict, const ByteSink& sink) {
  std::vector<torch::Tensor> storages;
  StateDictPickler pickle;
  pickle.proto();
  pickle.empty_ordered_dict();
  pickle.mark();
  for (const auto& [name, value] : dict) {
    const torch::Tensor tensor = value.detach().to(torch::kCPU).contiguous();
    pickle.string(name);
    pickle.global("torch._utils", "_rebuild_tensor_v2");
    pickle.mark();
    pickle.mark();  // the persistent id: ('storage', torch.XStorage, key, 'cpu', numel)
    pickle.string("storage");
    pickle.global("torch", storage_name(tensor.scalar_type()));
    pickle.string(std::to_string(storages.size()));
    pickle.string("cpu");
    pickle.integer(tensor.numel());
    pickle.tuple();
    pickle.persistent_id();
    pickle.integer(0);
    pickle.int_tuple(tensor.sizes());
    pickle.int_tuple(tensor.strides());
    pickle.boolean(false);
    pickle.empty_ordered_dict();  // backward hooks
    pickle.tuple();
    pickle.reduce();
    storages.push_back(tensor);
  }
  pickle.set_items();
  pickle.stop();

  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    sink(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", pickle.bytes().data(), pickle.bytes().size());
  writer.writeRecord("byteorder", "little", 6);
  for (std::size_t i = 0; i < storages.size(); ++i) {
    writer.writeRecord("data/" + std::to_string(i), storages[i].data_ptr(), storages[i].nbytes());
  }
  writer.writeEndOfFile();
}

void save_state_dict(const StateDict& dict, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) {
    serialize_state_dict(dict, [&](const char* data, std::size_t size) { out.write(data, static_cast<std::streamsize>(size)); });
  });
}

}  // namespace luong::models
