#include "gputrain/checkpoint/state_dict.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "gputrain/common/error.h"
#include "module_io.h"

namespace gputrain::checkpoint {

namespace {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

// A global the reader knows: what REDUCE of it builds.
enum class Global { kOrderedDict, kRebuildTensor, kStorageType };

// One pickled value. Containers are shared (the memo refers to them) and
// mutable (SETITEMS fills a dict already memoised).
struct Value {
  struct None {};
  struct Tuple {
    std::vector<ValuePtr> items;
  };
  struct Dict {
    std::vector<std::pair<ValuePtr, ValuePtr>> items;
  };
  struct GlobalRef {
    Global kind;
    at::ScalarType dtype = at::kFloat;  // kStorageType
  };
  std::variant<None, bool, int64_t, double, std::string, Tuple, Dict, GlobalRef, at::Tensor> v;
};

ValuePtr make(decltype(Value::v) v) { return std::make_shared<Value>(Value{std::move(v)}); }

// The storage classes torch.save names for each dtype (torch/storage.py's legacy names).
const std::map<std::string, at::ScalarType>& storage_types() {
  static const std::map<std::string, at::ScalarType> types{
      {"FloatStorage", at::kFloat},       {"DoubleStorage", at::kDouble}, {"HalfStorage", at::kHalf},
      {"BFloat16Storage", at::kBFloat16}, {"LongStorage", at::kLong},     {"IntStorage", at::kInt},
      {"ShortStorage", at::kShort},       {"CharStorage", at::kChar},     {"ByteStorage", at::kByte},
      {"BoolStorage", at::kBool}};
  return types;
}

class Reader {
 public:
  Reader(std::string_view pickle, const StorageRecord& record, const std::string& path)
      : in_(pickle), record_(record), path_(path) {}
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  // A pickle can put a container inside itself (memo, then SETITEMS): emptied, none keeps another alive.
  ~Reader() {
    for (const ValuePtr& v : containers_) {
      if (auto* t = std::get_if<Value::Tuple>(&v->v)) t->items.clear();
      if (auto* d = std::get_if<Value::Dict>(&v->v)) d->items.clear();
    }
  }

  ValuePtr run() {
    while (true) {
      const auto op = static_cast<unsigned char>(take(1)[0]);
      switch (op) {
        case 0x80:
          take(1);
          break;  // PROTO
        case '.':
          return pop();  // STOP
        case '(':
          marks_.push_back(stack_.size());
          break;
        case 'N':
          push(make(Value::None{}));
          break;
        case 0x88:
          push(make(true));
          break;
        case 0x89:
          push(make(false));
          break;
        case 'K':
          push(make(static_cast<int64_t>(little<uint8_t>())));
          break;
        case 'M':
          push(make(static_cast<int64_t>(little<uint16_t>())));
          break;
        case 'J':
          push(make(static_cast<int64_t>(little<int32_t>())));
          break;
        case 0x8a:
          push(make(long1()));
          break;
        case 'G':
          push(make(big_double()));
          break;
        case 'X':
          push(make(std::string(take(little<uint32_t>()))));
          break;
        case 0x8c:
          push(make(std::string(take(little<uint8_t>()))));
          break;  // SHORT_BINUNICODE
        case ')':
          push(make(Value::Tuple{}));
          break;
        case 0x85:
          tuple_of(1);
          break;
        case 0x86:
          tuple_of(2);
          break;
        case 0x87:
          tuple_of(3);
          break;
        case 't':
          tuple_of(stack_.size() - pop_mark());
          break;
        case '}':
          push(container(Value::Dict{}));  // SETITEMS may put it inside itself
          break;
        case 'u':
          set_items(pop_mark());
          break;
        case 's':
          set_items(stack_.size() - 2);
          break;
        case 'q':
          memo(little<uint8_t>());
          break;
        case 'r':
          memo(little<uint32_t>());
          break;
        case 0x94:
          memo(memo_.size());
          break;  // MEMOIZE
        case 'h':
          push(recall(little<uint8_t>()));
          break;
        case 'j':
          push(recall(little<uint32_t>()));
          break;
        case 'c':
          global();
          break;
        case 'R':
          reduce();
          break;
        case 'b':
          pop();
          break;  // BUILD: an OrderedDict's attributes (state_dict's _metadata), not weights
        case 'Q':
          persistent();
          break;
        default:
          fail(fmt::format("pickle opcode 0x{:02x}, which a state dict of tensors does not use", op));
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(
        fmt::format("{}: is not a state dict gputrain reads: {}; save a dict of tensors "
                    "(torch.save(model.state_dict(), path))",
                    path_, what));
  }

  std::string_view take(std::size_t n) {
    if (in_.size() < n) fail("its data.pkl ends early (cut short?)");
    const std::string_view out = in_.substr(0, n);
    in_.remove_prefix(n);
    return out;
  }
  template <typename T>
  T little() {
    T value{};
    std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));  // pickle integers are little-endian, as x86 and ARM
    return value;
  }
  int64_t long1() {
    const auto n = little<uint8_t>();
    if (n > 8) fail("an integer of more than 64 bits");
    const std::string_view bytes = take(n);
    uint64_t value = 0;
    for (std::size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(bytes[n - 1]) & 0x80)) value |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(value);
  }
  double big_double() {
    const std::string_view bytes = take(8);
    uint64_t bits = 0;
    for (const char c : bytes) bits = (bits << 8) | static_cast<unsigned char>(c);
    double value = 0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  std::string line() {
    const std::size_t end = in_.find('\n');
    if (end == std::string_view::npos) fail("its data.pkl ends early (cut short?)");
    std::string out(in_.substr(0, end));
    in_.remove_prefix(end + 1);
    return out;
  }

  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  ValuePtr container(decltype(Value::v) v) {
    containers_.push_back(make(std::move(v)));
    return containers_.back();
  }
  ValuePtr pop() {
    if (stack_.empty()) fail("its pickle takes from an empty stack");
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::size_t pop_mark() {
    if (marks_.empty() || marks_.back() > stack_.size()) fail("its pickle closes a mark it never opened");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    return mark;
  }
  void memo(std::size_t index) {
    if (stack_.empty()) fail("its pickle memoises an empty stack");
    memo_[index] = stack_.back();
  }
  ValuePtr recall(std::size_t index) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) fail(fmt::format("its pickle recalls memo {}, which it never stored", index));
    return found->second;
  }
  void tuple_of(std::size_t n) {
    if (n > stack_.size()) fail("its pickle builds a tuple of more than the stack holds");
    Value::Tuple t{std::vector<ValuePtr>(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end())};
    stack_.resize(stack_.size() - n);
    push(container(std::move(t)));
  }
  void set_items(std::size_t first) {
    if (first == 0 || first > stack_.size() || (stack_.size() - first) % 2 != 0) fail("its pickle sets items oddly");
    auto* dict = std::get_if<Value::Dict>(&stack_[first - 1]->v);
    if (dict == nullptr) fail("its pickle sets items of something that is not a dict");
    for (std::size_t i = first; i < stack_.size(); i += 2) dict->items.emplace_back(stack_[i], stack_[i + 1]);
    stack_.resize(first);
  }

  void global() {
    const std::string module = line();
    const std::string name = line();
    if (module == "collections" && name == "OrderedDict") return push(make(Value::GlobalRef{Global::kOrderedDict}));
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      return push(make(Value::GlobalRef{Global::kRebuildTensor}));
    }
    if (module == "torch") {
      const auto found = storage_types().find(name);
      if (found != storage_types().end()) {
        return push(make(Value::GlobalRef{Global::kStorageType, found->second}));
      }
    }
    fail(fmt::format("it refers to {}.{}", module, name));
  }

  static const std::vector<ValuePtr>& items(const ValuePtr& v) {
    static const std::vector<ValuePtr> none;
    const auto* t = std::get_if<Value::Tuple>(&v->v);
    return t ? t->items : none;
  }
  int64_t integer(const ValuePtr& v) {
    const auto* i = std::get_if<int64_t>(&v->v);
    if (i == nullptr) fail("a tensor's size, stride or offset is not an integer");
    return *i;
  }
  std::vector<int64_t> integers(const ValuePtr& v) {
    std::vector<int64_t> out;
    for (const ValuePtr& item : items(v)) out.push_back(integer(item));
    return out;
  }

  void reduce() {
    const ValuePtr args = pop();
    const ValuePtr callable = pop();
    const auto* g = std::get_if<Value::GlobalRef>(&callable->v);
    if (g == nullptr || g->kind == Global::kStorageType) fail("it calls something that is not a known constructor");
    if (g->kind == Global::kOrderedDict) return push(container(Value::Dict{}));  // items follow (SETITEMS)
    // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
    const std::vector<ValuePtr>& a = items(args);
    if (a.size() < 4) fail("_rebuild_tensor_v2 without its storage, offset, size and stride");
    const auto* storage = std::get_if<at::Tensor>(&a[0]->v);
    if (storage == nullptr) fail("a tensor whose storage is not one");
    const std::vector<int64_t> size = integers(a[2]);
    const std::vector<int64_t> stride = integers(a[3]);
    const int64_t offset = integer(a[1]);
    int64_t last = offset;  // the last element's index in the storage must be inside it
    for (std::size_t d = 0; d < size.size() && d < stride.size(); ++d) {
      if (size[d] < 0 || stride[d] < 0) fail("a tensor with a negative size or stride");
      // Past its storage either way, and kept from overflowing the sum below.
      if (size[d] > 1 && (size[d] > storage->numel() || stride[d] > storage->numel())) {
        fail("a tensor that does not fit in its storage");
      }
      if (size[d] == 0) last = -1;
      if (last >= 0) last += (size[d] - 1) * stride[d];
    }
    if (size.size() != stride.size() || offset < 0 || last >= storage->numel()) {
      fail("a tensor that does not fit in its storage");
    }
    push(make(storage->as_strided(size, stride, offset).clone()));
  }

  // ('storage', <storage type>, key, location, numel): the record data/<key>.
  void persistent() {
    const ValuePtr popped = pop();
    const std::vector<ValuePtr>& id = items(popped);
    const auto* tag = id.size() == 5 ? std::get_if<std::string>(&id[0]->v) : nullptr;
    const auto* type = id.size() == 5 ? std::get_if<Value::GlobalRef>(&id[1]->v) : nullptr;
    const auto* key = id.size() == 5 ? std::get_if<std::string>(&id[2]->v) : nullptr;
    if (tag == nullptr || *tag != "storage" || type == nullptr || type->kind != Global::kStorageType ||
        key == nullptr) {
      fail("a persistent id that is not a tensor storage");
    }
    const int64_t numel = integer(id[4]);
    const std::string record = "data/" + *key;
    const std::optional<std::string> bytes = numel >= 0 ? record_(record) : std::nullopt;
    if (!bytes) fail(fmt::format("the storage {} is missing", record));
    const auto element = static_cast<int64_t>(c10::elementSize(type->dtype));
    if (static_cast<int64_t>(bytes->size()) != numel * element) {
      fail(fmt::format("the storage {} holds {} bytes for {} elements of {}", record, bytes->size(), numel,
                       c10::toString(type->dtype)));
    }
    at::Tensor storage = at::empty({numel}, at::TensorOptions().dtype(type->dtype));
    if (!bytes->empty()) std::memcpy(storage.data_ptr(), bytes->data(), bytes->size());
    push(make(std::move(storage)));
  }

  std::string_view in_;
  const StorageRecord& record_;
  std::vector<ValuePtr> containers_;
  const std::string& path_;
  std::vector<ValuePtr> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::size_t, ValuePtr> memo_;
};

}  // namespace

NamedTensorList unpickle_state_dict(std::string_view pickle, const StorageRecord& record, const std::string& path) {
  Reader reader(pickle, record, path);
  const ValuePtr root = reader.run();
  const auto* dict = std::get_if<Value::Dict>(&root->v);
  if (dict == nullptr) {
    throw CheckpointError(fmt::format(
        "{}: holds a pickled value that is not a dict; save the model's state_dict() (torch.save(model.state_dict(), "
        "path)), not the model",
        path));
  }
  NamedTensorList out;
  for (const auto& [key, value] : dict->items) {
    const auto* name = std::get_if<std::string>(&key->v);
    const auto* tensor = std::get_if<at::Tensor>(&value->v);
    if (name == nullptr || tensor == nullptr) {
      throw CheckpointError(fmt::format(
          "{}: its dict holds something other than a tensor under a name; a state dict maps names to tensors", path));
    }
    out.emplace_back(*name, *tensor);
  }
  return out;
}

NamedTensorList read_state_dict(caffe2::serialize::PyTorchStreamReader& zip, const std::string& path) {
  if (!zip.hasRecord("data.pkl")) {
    throw CheckpointError(fmt::format("{}: is a zip archive without data.pkl: not a file torch.save wrote", path));
  }
  const auto read = [&zip](const std::string& name) -> std::optional<std::string> {
    if (!zip.hasRecord(name)) return std::nullopt;
    auto [data, size] = zip.getRecord(name);
    return std::string(static_cast<const char*>(data.get()), size);
  };
  const std::optional<std::string> pickle = read("data.pkl");
  return unpickle_state_dict(*pickle, read, path);
}

CheckpointError detail::unreadable_zip(const std::string& path, const c10::Error& error) {
  return CheckpointError(fmt::format(
      "{}: is a zip archive, as PyTorch writes, but cannot be read ({}): cut short or damaged; write it again", path,
      detail::torch_message(error)));
}

}  // namespace gputrain::checkpoint
