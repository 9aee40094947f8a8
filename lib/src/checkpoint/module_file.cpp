#include "module_file.h"

#include <c10/core/ScalarType.h>
#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace gputrain::checkpoint::detail {

namespace {

// Python pickle, protocol 2: the opcodes TorchScript's unpickler reads a
// module's state from (torch/csrc/jit/serialization/unpickler.cpp).
class Pickle {
 public:
  explicit Pickle(std::string& out) : out_(out) {}

  void protocol() { out_ += "\x80\x02"; }
  void global(std::string_view module, std::string_view name) {
    out_ += 'c';
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
  }
  void text(std::string_view s) {
    out_ += 'X';
    append_little_endian(static_cast<std::uint32_t>(s.size()), 4);
    out_ += s;
  }
  void integer(std::int64_t v) {
    if (v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max()) {
      out_ += 'J';  // BININT
      append_little_endian(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
    } else {
      out_ += '\x8a';  // LONG1: 8 bytes, two's complement
      out_ += '\x08';
      append_little_endian(static_cast<std::uint64_t>(v), 8);
    }
  }
  void boolean(bool b) { out_ += b ? '\x88' : '\x89'; }
  void mark() { out_ += '('; }
  void tuple() { out_ += 't'; }  // the items since the mark
  void empty_tuple() { out_ += ')'; }
  void empty_dict() { out_ += '}'; }
  void set_items() { out_ += 'u'; }  // the key-value pairs since the mark, into the dict
  void new_object() { out_ += '\x81'; }
  void build() { out_ += 'b'; }
  void reduce() { out_ += 'R'; }
  void persistent_id() { out_ += 'Q'; }
  void stop() { out_ += '.'; }
  void raw(std::string_view bytes) { out_ += bytes; }

 private:
  void append_little_endian(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string& out_;
};

// A TorchScript string literal.
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

class ModuleFileWriter {
 public:
  std::string write(const torch::nn::Module& model, std::string_view training_data) {
    std::string file;
    caffe2::serialize::PyTorchStreamWriter zip([&file](const void* data, std::size_t size) {
      file.append(static_cast<const char*>(data), size);
      return size;
    });
    zip_ = &zip;
    std::string data;
    Pickle pickle(data);
    pickle.protocol();
    pickle.raw(object(model).bytes);
    pickle.stop();
    zip.writeRecord("data.pkl", data.data(), data.size());
    for (const auto& [layout, name] : classes_) {
      const std::string source = class_source(layout);
      zip.writeRecord("code/__torch__/" + name + ".py", source.data(), source.size());
    }
    std::string constants;
    Pickle constants_pickle(constants);
    constants_pickle.protocol();
    constants_pickle.empty_tuple();
    constants_pickle.stop();
    zip.writeRecord("constants.pkl", constants.data(), constants.size());
    if (!training_data.empty()) zip.writeRecord(kTrainingDataRecord, training_data.data(), training_data.size());
    zip.writeEndOfFile();
    return file;
  }

 private:
  // What a module's class declares: its parameters, buffers and children
  // (name, class), in Module::save's order. Modules with equal layouts share
  // a class, so a long Sequential of like layers needs a handful.
  struct Layout {
    std::vector<std::string> parameters;
    std::vector<std::string> buffers;
    std::vector<std::pair<std::string, std::string>> children;
    bool operator<(const Layout& other) const {
      return std::tie(parameters, buffers, children) < std::tie(other.parameters, other.buffers, other.children);
    }
  };

  static std::string class_source(const Layout& layout) {
    const auto name_list = [](const std::vector<std::string>& names) {
      std::string list = "[";
      for (const std::string& name : names) list += literal(name) + ", ";
      return list + "]";
    };
    // Names that are not identifiers ("0", "1", ... in a Sequential) can only
    // be declared through __annotations__; it serves for every name.
    std::string source = "class Module(Module):\n";
    source += "  __parameters__ = " + name_list(layout.parameters) + "\n";
    source += "  __buffers__ = " + name_list(layout.buffers) + "\n";
    source += "  __annotations__ = []\n";
    for (const std::string& name : layout.parameters) source += "  __annotations__[" + literal(name) + "] = Tensor\n";
    for (const std::string& name : layout.buffers) source += "  __annotations__[" + literal(name) + "] = Tensor\n";
    for (const auto& [name, type] : layout.children) {
      source += "  __annotations__[" + literal(name) + "] = __torch__." + type + ".Module\n";
    }
    return source;
  }

  // A module pickled as an object of its layout's class.
  struct Pickled {
    std::string class_name;  // the module under __torch__ that declares the class
    std::string bytes;
  };

  // The pickled object for `module`: its class, then its state, a dict of
  // its tensors and children by name, as Module::save lays them out.
  Pickled object(const torch::nn::Module& module) {
    Layout layout;
    std::string state;
    Pickle pickle(state);
    const auto add_tensors = [&](const torch::OrderedDict<std::string, torch::Tensor>& named,
                                 std::vector<std::string>& names) {
      for (const auto& item : named) {
        if (!item.value().defined()) continue;
        names.push_back(item.key());
        pickle.text(item.key());
        tensor(pickle, item.value());
      }
    };
    add_tensors(module.named_parameters(/*recurse=*/false), layout.parameters);
    add_tensors(module.named_buffers(/*recurse=*/false), layout.buffers);
    for (const auto& child : module.named_children()) {
      if (!child.value()->is_serializable()) continue;  // Module::save leaves these out too
      const Pickled child_object = object(*child.value());
      layout.children.emplace_back(child.key(), child_object.class_name);
      pickle.text(child.key());
      pickle.raw(child_object.bytes);
    }
    auto [entry, added] = classes_.try_emplace(std::move(layout), "");
    if (added) entry->second = "___torch_mangle_" + std::to_string(classes_.size() - 1);

    std::string out;
    Pickle head(out);
    head.global("__torch__." + entry->second, "Module");
    head.empty_tuple();
    head.new_object();
    head.empty_dict();
    head.mark();
    head.raw(state);
    head.set_items();
    head.build();
    return {entry->second, std::move(out)};
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, sizes, strides, requires_grad, hooks)
  // over a storage record of its own.
  void tensor(Pickle& pickle, const torch::Tensor& value) {
    const torch::Tensor t = value.detach().to(torch::kCPU).contiguous();
    const std::string key = std::to_string(storages_++);
    zip_->writeRecord("data/" + key, t.data_ptr(), t.numel() * t.element_size());
    pickle.global("torch._utils", "_rebuild_tensor_v2");
    pickle.mark();
    pickle.mark();
    pickle.text("storage");
    pickle.global("torch", std::string(c10::toString(t.scalar_type())) + "Storage");
    pickle.text(key);
    pickle.text("cpu");
    pickle.integer(t.numel());
    pickle.tuple();
    pickle.persistent_id();
    pickle.integer(0);
    pickle.mark();
    for (const std::int64_t size : t.sizes()) pickle.integer(size);
    pickle.tuple();
    pickle.mark();
    for (const std::int64_t stride : t.strides()) pickle.integer(stride);
    pickle.tuple();
    pickle.boolean(value.requires_grad());
    pickle.global("collections", "OrderedDict");
    pickle.empty_tuple();
    pickle.reduce();
    pickle.tuple();
    pickle.reduce();
  }

  caffe2::serialize::PyTorchStreamWriter* zip_ = nullptr;
  std::map<Layout, std::string> classes_;  // layout -> its class's module name
  std::size_t storages_ = 0;
};

}  // namespace

std::string module_file_bytes(const torch::nn::Module& model, std::string_view training_data) {
  return ModuleFileWriter().write(model, training_data);
}

}  // namespace gputrain::checkpoint::detail
