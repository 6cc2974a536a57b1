#include "luong/models/state_dict.h"

#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "luong/models/zip_archive.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "storage_types.h"

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
  int depth = 0;       // containers: 1 + the deepest value put into them
  int64_t integer = 0;
  double real = 0;
  std::string text;    // string; global "module.name"; storage key
  std::vector<ValuePtr> items;                          // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;   // dict, in insertion order
  torch::ScalarType dtype = torch::kFloat;              // storage
  torch::Tensor tensor;
};

torch::ScalarType storage_dtype(const std::string& global, const std::string& origin) {
  for (const StorageType& type : kStorageTypes) {
    if (global == std::string("torch.") + type.name) return type.dtype;
  }
  throw CheckpointError(origin + ": unsupported storage type " + printable(global));
}

// What a pickle may build: a state dict's pickle nests 4 levels (dict, tensor record, size tuple)
// and makes about 15 values a tensor; a hostile one nesting 10^6 tuples would overflow the stack in
// the values' destructors, and one of 10^8 values would take gigabytes.
constexpr int kMaxPickleDepth = 32;
constexpr std::size_t kMaxPickleValues = 1'000'000;
constexpr std::size_t kMaxPickleMarks = 64;

class StateDictUnpickler {
 public:
  StateDictUnpickler(std::string_view pickle, const ZipArchive& archive, std::string origin)
      : data_(pickle), archive_(archive), origin_(std::move(origin)) {}
  // A pickle can make a value hold itself (memo references); every value's children are dropped
  // before the values, so that neither a cycle leaks nor a long chain recurses in its destructors.
  ~StateDictUnpickler() {
    stack_.clear();
    memo_.clear();
    for (const ValuePtr& value : made_) {
      value->items.clear();
      value->entries.clear();
    }
  }
  StateDictUnpickler(const StateDictUnpickler&) = delete;
  StateDictUnpickler& operator=(const StateDictUnpickler&) = delete;

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

  ValuePtr make(Value::Kind kind) {
    if (made_.size() >= kMaxPickleValues) fail("more than " + std::to_string(kMaxPickleValues) + " values");
    auto v = std::make_shared<Value>();
    v->kind = kind;
    made_.push_back(v);
    return v;
  }
  // `child` goes into `container`: the nesting bound, checked as it grows.
  void adopt(Value& container, const ValuePtr& child) {
    if (child.get() == &container) fail("a container holds itself");
    container.depth = std::max(container.depth, child->depth + 1);
    if (container.depth > kMaxPickleDepth) fail("nested deeper than " + std::to_string(kMaxPickleDepth) + " levels");
  }
  void push(ValuePtr value) {
    if (stack_.size() >= kMaxPickleValues) fail("stack deeper than " + std::to_string(kMaxPickleValues));
    stack_.push_back(std::move(value));
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
    push(value);
  }
  void push_tuple(std::vector<ValuePtr> items) {
    auto value = make(Value::Kind::kTuple);
    for (const ValuePtr& item : items) adopt(*value, item);
    value->items = std::move(items);
    push(value);
  }
  void append(const ValuePtr& item) {
    Value& list = *top();
    if (list.kind != Value::Kind::kList) fail("APPEND to something not a list");
    adopt(list, item);
    list.items.push_back(item);
  }
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("bad memo reference");
    push(it->second);
  }
  void set_items(ValuePtr& dict, const std::vector<ValuePtr>& items) {
    if (dict->kind != Value::Kind::kDict || items.size() % 2 != 0) fail("bad SETITEMS");
    for (size_t i = 0; i < items.size(); i += 2) {
      adopt(*dict, items[i]);
      adopt(*dict, items[i + 1]);
      dict->entries.emplace_back(items[i], items[i + 1]);
    }
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
        pid->items[1]->kind != Value::Kind::kGlobal || pid->items[2]->kind != Value::Kind::kString ||
        pid->items[4]->kind != Value::Kind::kInt) {
      fail("unknown persistent id");
    }
    auto value = make(Value::Kind::kStorage);
    value->dtype = storage_dtype(pid->items[1]->text, origin_);
    const std::string key = pid->items[2]->text;
    const auto found = storages_.find(key);
    if (found != storages_.end()) {
      if (found->second.scalar_type() != value->dtype) fail("storage " + printable(key) + " read as two types");
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

  // A tensor's view of its storage, checked before anything is allocated: within the storage, and no
  // more elements than the storage holds (a stride of 0 would repeat 4 bytes into terabytes), every
  // product checked for overflow. What a view may read is then bounded by the file's own bytes.
  void check_view(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset,
                  int64_t storage_numel) {
    if (sizes.size() != strides.size()) fail("tensor sizes and strides differ in rank");
    if (sizes.size() > 16) fail("a tensor of more than 16 dimensions");
    if (offset < 0) fail("negative tensor offset");
    int64_t numel = 1, last = offset;  // last: index of the last element the view reads
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < 0 || strides[i] < 0) fail("negative tensor size or stride");
      if (__builtin_mul_overflow(numel, sizes[i], &numel)) fail("tensor shape overflows");
    }
    if (numel > storage_numel) {
      fail("a tensor of " + std::to_string(numel) + " elements from a storage of " + std::to_string(storage_numel));
    }
    if (numel == 0) return;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t span = 0;
      if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) || __builtin_add_overflow(last, span, &last)) {
        fail("tensor view overflows");
      }
    }
    if (last >= storage_numel) fail("tensor view exceeds its storage");
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
      if (args->items[1]->kind != Value::Kind::kInt) fail("bad tensor record");
      const int64_t offset = args->items[1]->integer;
      const std::vector<int64_t> sizes = ints(args->items[2]);
      const std::vector<int64_t> strides = ints(args->items[3]);
      check_view(sizes, strides, offset, flat.numel());
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
    if (push_literal(op) || build_collection(op)) return;
    switch (op) {
      case 0x80: read_bytes(1); break;                       // PROTO
      case 0x95: read_bytes(8); break;                       // FRAME
      case '(':
        if (marks_.size() >= kMaxPickleMarks) fail("more than " + std::to_string(kMaxPickleMarks) + " open marks");
        marks_.push_back(stack_.size());
        break;
      case 'q': memo_put(read_uint(1)); break;
      case 'r': memo_put(read_uint(4)); break;
      case 0x94: memo_put(memo_.size()); break;              // MEMOIZE
      case 'h': memo_get(read_uint(1)); break;
      case 'j': memo_get(read_uint(4)); break;
      default: {
        std::ostringstream message;
        message << "unsupported pickle opcode 0x" << std::hex << static_cast<int>(op);
        fail(message.str());
      }
    }
  }

  // Strings, globals, numbers, booleans and None; false for another opcode.
  bool push_literal(unsigned char op) {
    switch (op) {
      case 'X': push_string(read_bytes(read_uint(4))); return true;
      case 0x8c: push_string(read_bytes(read_uint(1))); return true;  // SHORT_BINUNICODE
      case 'c': {
        auto v = make(Value::Kind::kGlobal);
        const std::string module = read_line();
        v->text = module + "." + read_line();
        push(v);
        return true;
      }
      case 0x93: {                                           // STACK_GLOBAL
        const ValuePtr name = pop();
        const ValuePtr module = pop();
        auto v = make(Value::Kind::kGlobal);
        v->text = module->text + "." + name->text;
        push(v);
        return true;
      }
      case 'K': push_int(static_cast<int64_t>(read_uint(1))); return true;
      case 'M': push_int(static_cast<int64_t>(read_uint(2))); return true;
      case 'J': push_int(static_cast<int32_t>(read_uint(4))); return true;
      case 0x8a: {                                           // LONG1
        const size_t n = read_uint(1);
        if (n > 8) fail("integer too large");
        uint64_t v = n == 0 ? 0 : read_uint(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        push_int(static_cast<int64_t>(v));
        return true;
      }
      case 'G': {
        std::string b = read_bytes(8);
        std::reverse(b.begin(), b.end());
        auto v = make(Value::Kind::kFloat);
        std::memcpy(&v->real, b.data(), 8);
        push(v);
        return true;
      }
      case 0x88:
      case 0x89: {
        auto v = make(Value::Kind::kBool);
        v->integer = op == 0x88;
        push(v);
        return true;
      }
      case 'N': push(make(Value::Kind::kNone)); return true;
      default: return false;
    }
  }

  // Dicts, lists and tuples, their items, storages and reductions; false for another opcode.
  bool build_collection(unsigned char op) {
    switch (op) {
      case '}': push(make(Value::Kind::kDict)); return true;
      case ']': push(make(Value::Kind::kList)); return true;
      case ')': push_tuple({}); return true;
      case 't': push_tuple(pop_to_mark()); return true;
      case 0x85: push_tuple({pop()}); return true;
      case 0x86: {
        ValuePtr b = pop(), a = pop();
        push_tuple({a, b});
        return true;
      }
      case 0x87: {
        ValuePtr c = pop(), b = pop(), a = pop();
        push_tuple({a, b, c});
        return true;
      }
      case 'a': append(pop()); return true;
      case 'e':
        for (auto& item : pop_to_mark()) append(item);
        return true;
      case 's': {
        ValuePtr value = pop(), key = pop();
        set_items(top(), {key, value});
        return true;
      }
      case 'u': {
        std::vector<ValuePtr> items = pop_to_mark();  // popped before top() is read
        set_items(top(), items);
        return true;
      }
      case 'Q': push(storage(pop())); return true;           // BINPERSID
      case 'R': {
        ValuePtr args = pop(), callable = pop();
        push(reduce(callable, args));
        return true;
      }
      case 'b': pop(); return true;                          // BUILD: OrderedDict._metadata, ignored
      default: return false;
    }
  }

  void push_string(std::string text) {
    auto v = make(Value::Kind::kString);
    v->text = std::move(text);
    push(v);
  }

  std::string_view data_;
  const ZipArchive& archive_;
  std::string origin_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::unordered_map<std::string, torch::Tensor> storages_;
  std::vector<ValuePtr> made_;
};

}  // namespace

namespace {

// Every parameter and buffer of `module` under its name, where it lives.
StateDict named_tensors(const torch::nn::Module& module) {
  StateDict dict;
  for (const auto& item : module.named_parameters(true)) dict.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) dict.emplace_back(item.key(), item.value());
  return dict;
}

}  // namespace

StateDict state_dict(const torch::nn::Module& module) {
  StateDict dict = named_tensors(module);
  for (auto& [name, tensor] : dict) tensor = tensor.detach().cpu();
  return dict;
}

StateDict parse_state_dict(const std::vector<char>& bytes, const std::string& origin) {
  try {
    const ZipArchive archive(bytes, origin);
    if (!archive.has("data.pkl")) throw CheckpointError(origin + ": not a torch.save file (no data.pkl)");
    // torch.save records the writer's byte order; its tensors' bytes are read as this machine's.
    if (archive.has("byteorder") && archive.get("byteorder") != "little") {
      throw CheckpointError(origin + ": written with byte order '" + printable(archive.get("byteorder"), 16) +
                            "'; luong reads little-endian archives only (load and save it again on a little-endian machine)");
    }
    const std::string_view pickle = archive.get("data.pkl");
    StateDictUnpickler unpickler(pickle, archive, origin);
    const ValuePtr root = unpickler.run();
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

std::optional<std::vector<char>> read_checkpoint_file(const std::string& path, std::uint64_t max_bytes) {
  try {
    return read_whole_file(path, max_bytes, "a checkpoint file of this model");
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
}

std::uint64_t state_dict_size_limit(const StateDict& dict) {
  std::uint64_t bytes = 1 << 20;
  for (const auto& [name, tensor] : dict) {
    // As float64, the widest a parameter is stored in, with its name, pickle record, zip headers and alignment.
    bytes += static_cast<std::uint64_t>(tensor.numel()) * 8 + 4096 + name.size();
  }
  return bytes;
}

std::uint64_t state_dict_size_limit(const torch::nn::Module& module) {
  return state_dict_size_limit(named_tensors(module));  // only their sizes are read: no copy off the device
}

StateDict read_state_dict(const std::string& path, std::uint64_t max_bytes) {
  const std::optional<std::vector<char>> bytes = read_checkpoint_file(path, max_bytes);
  if (!bytes) throw CheckpointError(path + ": cannot open checkpoint");
  if (bytes->empty()) throw CheckpointError(path + ": checkpoint is empty");
  return parse_state_dict(*bytes, path);
}

void load_state_dict(torch::nn::Module& module, const StateDict& dict, const std::string& origin) {
  std::unordered_map<std::string, torch::Tensor> by_name(dict.begin(), dict.end());
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  std::vector<std::string> not_floating;
  std::vector<std::string> non_finite;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  const auto visit = [&](const std::string& name, torch::Tensor& target) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(printable(name));
      return;
    }
    const torch::Tensor& source = it->second;
    if (source.sizes() != target.sizes()) {
      std::ostringstream line;
      line << printable(name) << " " << source.sizes() << " vs model " << target.sizes();
      mismatched.push_back(line.str());
    } else if (target.is_floating_point() && !source.is_floating_point()) {
      // Integers and booleans would be converted without a word: not weights, whatever their shape.
      not_floating.push_back(printable(name) + " (" + c10::toString(source.scalar_type()) + ")");
    } else if (source.is_floating_point() && !torch::isfinite(source).all().item<bool>()) {
      non_finite.push_back(printable(name));
    } else {
      copies.emplace_back(target, source);
    }
    by_name.erase(it);
  };
  for (auto& item : module.named_parameters(true)) visit(item.key(), item.value());
  for (auto& item : module.named_buffers(true)) visit(item.key(), item.value());

  if (!missing.empty() || !mismatched.empty() || !not_floating.empty() || !non_finite.empty() || !by_name.empty()) {
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
    list("not floating-point", not_floating);
    list("holding NaN or Inf", non_finite);
    std::string text = message.str();
    text.pop_back();
    throw CheckpointError(text);
  }
  torch::NoGradGuard no_grad;
  for (auto& [target, source] : copies) target.copy_(source);
}

}  // namespace luong::models
