#include "luong/models/state_dict.h"

#include <caffe2/serialize/inline_container.h>


#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "luong/models/zip_archive.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong::models {
namespace {

// ---- a pickle reader for state dicts ---------------------------------------------------------------
// LibTorch's own unpickler rejects the OrderedDict (with its `_metadata` BUILD) that Python's
// state_dict() returns, so the few opcodes torch.save emits for a dict of tensors are read here.

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor, kOpaque };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  double real = 0;
  std::string text;    // string; global "module.name"; storage key
  std::vector<ValuePtr> items;                          // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;   // dict, in insertion order
  torch::ScalarType dtype = torch::kFloat;              // storage
  torch::Tensor tensor;
};

ValuePtr make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

// torch.<Name>Storage globals of torch.save, both ways.
struct StorageType {
  torch::ScalarType dtype;
  const char* name;
};
constexpr StorageType kStorageTypes[] = {
    {torch::kFloat, "FloatStorage"}, {torch::kDouble, "DoubleStorage"},     {torch::kHalf, "HalfStorage"},
    {torch::kBFloat16, "BFloat16Storage"}, {torch::kLong, "LongStorage"}, {torch::kInt, "IntStorage"},
    {torch::kShort, "ShortStorage"}, {torch::kChar, "CharStorage"},       {torch::kByte, "ByteStorage"},
    {torch::kBool, "BoolStorage"}};

torch::ScalarType storage_dtype(const std::string& global, const std::string& origin) {
  for (const StorageType& type : kStorageTypes) {
    if (global == std::string("torch.") + type.name) return type.dtype;
  }
  throw CheckpointError(origin + ": unsupported storage type " + printable(global));
}

class StateDictUnpickler {
 public:
  StateDictUnpickler(std::string_view pickle, const ZipArchive& archive, std::string origin)
      : data_(pickle), archive_(archive), origin_(std::move(origin)) {}

  ValuePtr run() {
    while (true) {
      const auto op = static_cast<unsigned char>(read_bytes(1)[0]);
      if (op == '.') break;
      execute(op);
    }
    if (stack_.size() != 1) fail("malformed pickle stack");
    return stack_.back();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(origin_ + ": not a readable state_dict (" + what + ")");
  }

  std::string read_bytes(size_t n) {
    if (n > data_.size() - pos_) fail("truncated pickle");
    std::string out(data_.substr(pos_, n));
    pos_ += n;
    return out;
  }
  uint64_t read_uint(size_t n) {
    const std::string b = read_bytes(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
    return v;
  }
  std::string read_line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("truncated pickle");
    std::string out(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  ValuePtr pop() {
    if (stack_.empty()) fail("stack underflow");
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  ValuePtr& top() {
    if (stack_.empty()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_to_mark() {
    if (marks_.empty()) fail("missing mark");
    const size_t mark = marks_.back();
    marks_.pop_back();
    if (mark > stack_.size()) fail("bad mark");
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  void push_int(int64_t v) {
    auto value = make(Value::Kind::kInt);
    value->integer = v;
    stack_.push_back(value);
  }
  void push_tuple(std::vector<ValuePtr> items) {
    auto value = make(Value::Kind::kTuple);
    value->items = std::move(items);
    stack_.push_back(value);
  }
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("bad memo reference");
    stack_.push_back(it->second);
  }
  void set_items(ValuePtr& dict, const std::vector<ValuePtr>& items) {
    if (dict->kind != Value::Kind::kDict || items.size() % 2 != 0) fail("bad SETITEMS");
    for (size_t i = 0; i < items.size(); i += 2) dict->entries.emplace_back(items[i], items[i + 1]);
  }

  std::vector<int64_t> ints(const ValuePtr& tuple) {
    if (tuple->kind != Value::Kind::kTuple) fail("expected a tuple of ints");
    std::vector<int64_t> out;
    for (const auto& item : tuple->items) {
      if (item->kind != Value::Kind::kInt) fail("expected a tuple of ints");
      out.push_back(item->integer);
    }
    return out;
  }

  ValuePtr storage(const ValuePtr& pid) {
    if (pid->kind != Value::Kind::kTuple || pid->items.size() < 5 || pid->items[0]->text != "storage" ||
        pid->items[1]->kind != Value::Kind::kGlobal) {
      fail("unknown persistent id");
    }
    auto value = make(Value::Kind::kStorage);
    value->dtype = storage_dtype(pid->items[1]->text, origin_);
    const std::string key = pid->items[2]->text;
    const auto found = storages_.find(key);
    if (found != storages_.end()) {
      value->tensor = found->second;
      return value;
    }
    const int64_t numel = pid->items[4]->integer;
    const std::string record = "data/" + key;
    if (!archive_.has(record)) fail("missing tensor data " + printable(record));
    const std::string_view data = archive_.get(record);
    const size_t element = c10::elementSize(value->dtype);
    if (numel < 0 || data.size() / element < static_cast<size_t>(numel)) fail("tensor data " + printable(record) + " is truncated");
    torch::Tensor flat = torch::empty({numel}, torch::TensorOptions().dtype(value->dtype));
    std::memcpy(flat.data_ptr(), data.data(), static_cast<size_t>(numel) * element);
    storages_[key] = flat;
    value->tensor = flat;
    return value;
  }

  ValuePtr reduce(const ValuePtr& callable, const ValuePtr& args) {
    if (callable->kind != Value::Kind::kGlobal || args->kind != Value::Kind::kTuple) fail("bad REDUCE");
    const std::string& name = callable->text;
    if (name == "collections.OrderedDict") return make(Value::Kind::kDict);
    // LibTorch's pickler wraps typed containers as restore_type_tag(value, "Dict[str, Tensor]").
    if (name == "torch.jit._pickle.restore_type_tag" && !args->items.empty()) return args->items[0];
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (args->items.size() < 4 || args->items[0]->kind != Value::Kind::kStorage) fail("bad tensor record");
      const torch::Tensor& flat = args->items[0]->tensor;
      const int64_t offset = args->items[1]->integer;
      const std::vector<int64_t> sizes = ints(args->items[2]);
      const std::vector<int64_t> strides = ints(args->items[3]);
      if (sizes.size() != strides.size()) fail("tensor sizes and strides differ in rank");
      bool empty = false;
      int64_t last = offset;  // index of the last element the view reads
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] < 0 || strides[i] < 0) fail("negative tensor size or stride");
        if (sizes[i] == 0) empty = true;
        else last += (sizes[i] - 1) * strides[i];
      }
      if (offset < 0 || (!empty && last >= flat.numel())) fail("tensor view exceeds its storage");
      auto value = make(Value::Kind::kTensor);
      value->tensor = flat.as_strided(sizes, strides, offset).clone();
      return value;
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Value::Kind::kTensor) fail("bad parameter record");
      return args->items[0];
    }
    return make(Value::Kind::kOpaque);
  }

  void execute(unsigned char op) {
    switch (op) {
      case 0x80: read_bytes(1); break;                       // PROTO
      case 0x95: read_bytes(8); break;                       // FRAME
      case '}': stack_.push_back(make(Value::Kind::kDict)); break;
      case ']': stack_.push_back(make(Value::Kind::kList)); break;
      case ')': push_tuple({}); break;
      case '(': marks_.push_back(stack_.size()); break;
      case 'q': memo_put(read_uint(1)); break;
      case 'r': memo_put(read_uint(4)); break;
      case 0x94: memo_put(memo_.size()); break;              // MEMOIZE
      case 'h': memo_get(read_uint(1)); break;
      case 'j': memo_get(read_uint(4)); break;
      case 'X': {
        auto v = make(Value::Kind::kString);
        v->text = read_bytes(read_uint(4));
        stack_.push_back(v);
        break;
      }
      case 0x8c: {                                           // SHORT_BINUNICODE
        auto v = make(Value::Kind::kString);
        v->text = read_bytes(read_uint(1));
        stack_.push_back(v);
        break;
      }
      case 'c': {
        auto v = make(Value::Kind::kGlobal);
        const std::string module = read_line();
        v->text = module + "." + read_line();
        stack_.push_back(v);
        break;
      }
      case 0x93: {                                           // STACK_GLOBAL
        const ValuePtr name = pop();
        const ValuePtr module = pop();
        auto v = make(Value::Kind::kGlobal);
        v->text = module->text + "." + name->text;
        stack_.push_back(v);
        break;
      }
      case 'K': push_int(static_cast<int64_t>(read_uint(1))); break;
      case 'M': push_int(static_cast<int64_t>(read_uint(2))); break;
      case 'J': push_int(static_cast<int32_t>(read_uint(4))); break;
      case 0x8a: {                                           // LONG1
        const size_t n = read_uint(1);
        if (n > 8) fail("integer too large");
        uint64_t v = n == 0 ? 0 : read_uint(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        push_int(static_cast<int64_t>(v));
        break;
      }
      case 'G': {
        std::string b = read_bytes(8);
        std::reverse(b.begin(), b.end());
        auto v = make(Value::Kind::kFloat);
        std::memcpy(&v->real, b.data(), 8);
        stack_.push_back(v);
        break;
      }
      case 0x88:
      case 0x89: {
        auto v = make(Value::Kind::kBool);
        v->integer = op == 0x88;
        stack_.push_back(v);
        break;
      }
      case 'N': stack_.push_back(make(Value::Kind::kNone)); break;
      case 't': push_tuple(pop_to_mark()); break;
      case 0x85: push_tuple({pop()}); break;
      case 0x86: {
        ValuePtr b = pop(), a = pop();
        push_tuple({a, b});
        break;
      }
      case 0x87: {
        ValuePtr c = pop(), b = pop(), a = pop();
        push_tuple({a, b, c});
        break;
      }
      case 'a': {
        ValuePtr item = pop();
        top()->items.push_back(item);
        break;
      }
      case 'e': {
        std::vector<ValuePtr> items = pop_to_mark();
        for (auto& item : items) top()->items.push_back(item);
        break;
      }
      case 's': {
        ValuePtr value = pop(), key = pop();
        set_items(top(), {key, value});
        break;
      }
      case 'u': {
        std::vector<ValuePtr> items = pop_to_mark();
        set_items(top(), items);
        break;
      }
      case 'Q': stack_.push_back(storage(pop())); break;     // BINPERSID
      case 'R': {
        ValuePtr args = pop(), callable = pop();
        stack_.push_back(reduce(callable, args));
        break;
      }
      case 'b': pop(); break;                                // BUILD: OrderedDict._metadata, ignored
      default: {
        std::ostringstream message;
        message << "unsupported pickle opcode 0x" << std::hex << static_cast<int>(op);
        fail(message.str());
      }
    }
  }

  std::string_view data_;
  const ZipArchive& archive_;
  std::string origin_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::unordered_map<std::string, torch::Tensor> storages_;
};

}  // namespace

StateDict state_dict(const torch::nn::Module& module) {
  StateDict dict;
  for (const auto& item : module.named_parameters(true)) dict.emplace_back(item.key(), item.value().detach().cpu());
  for (const auto& item : module.named_buffers(true)) dict.emplace_back(item.key(), item.value().detach().cpu());
  return dict;
}

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

StateDict parse_state_dict(const std::vector<char>& bytes, const std::string& origin) {
  try {
    const ZipArchive archive(bytes, origin);
    if (!archive.has("data.pkl")) throw CheckpointError(origin + ": not a torch.save file (no data.pkl)");
    const std::string_view pickle = archive.get("data.pkl");
    const ValuePtr root = StateDictUnpickler(pickle, archive, origin).run();
    if (root->kind != Value::Kind::kDict) throw CheckpointError(origin + ": holds no dict of tensors");
    StateDict dict;
    for (const auto& [key, value] : root->entries) {
      if (key->kind != Value::Kind::kString || value->kind != Value::Kind::kTensor) {
        throw CheckpointError(origin + ": state_dict entries must map names to tensors");
      }
      dict.emplace_back(key->text, value->tensor);
    }
    return dict;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw CheckpointError(origin + ": corrupt or truncated checkpoint (" + what.substr(0, what.find('\n')) + ")");
  }
}

std::optional<std::vector<char>> read_checkpoint_file(const std::string& path) {
  try {
    return read_whole_file(path);
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
}

StateDict read_state_dict(const std::string& path) {
  const std::optional<std::vector<char>> bytes = read_checkpoint_file(path);
  if (!bytes) throw CheckpointError(path + ": cannot open checkpoint");
  if (bytes->empty()) throw CheckpointError(path + ": checkpoint is empty");
  return parse_state_dict(*bytes, path);
}

void load_state_dict(torch::nn::Module& module, const StateDict& dict, const std::string& origin) {
  std::unordered_map<std::string, torch::Tensor> by_name(dict.begin(), dict.end());
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  const auto visit = [&](const std::string& name, torch::Tensor& target) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(printable(name));
      return;
    }
    if (it->second.sizes() != target.sizes()) {
      std::ostringstream line;
      line << printable(name) << " " << it->second.sizes() << " vs model " << target.sizes();
      mismatched.push_back(line.str());
    } else {
      copies.emplace_back(target, it->second);
    }
    by_name.erase(it);
  };
  for (auto& item : module.named_parameters(true)) visit(item.key(), item.value());
  for (auto& item : module.named_buffers(true)) visit(item.key(), item.value());

  if (!missing.empty() || !mismatched.empty() || !by_name.empty()) {
    std::ostringstream message;
    message << origin << ": state_dict does not match the model;";
    const auto list = [&](const char* label, const std::vector<std::string>& names) {
      if (names.empty()) return;
      message << " " << label << ":";
      for (size_t i = 0; i < names.size(); ++i) message << (i ? ", " : " ") << names[i];
      message << ";";
    };
    std::vector<std::string> unexpected;
    for (const auto& [name, tensor] : dict) {
      if (by_name.count(name)) unexpected.push_back(printable(name));
    }
    list("missing", missing);
    list("unexpected", unexpected);
    list("mis-shaped", mismatched);
    std::string text = message.str();
    text.pop_back();
    throw CheckpointError(text);
  }
  torch::NoGradGuard no_grad;
  for (auto& [target, source] : copies) target.copy_(source);
}

}  // namespace luong::models
