#include "gputrain/checkpoint/safetensors.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>

#include "gputrain/common/error.h"
#include "module_io.h"

namespace gputrain::checkpoint {

namespace {

// The tensors' bytes are copied as they are: the format's byte order must be the machine's.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors holds little-endian tensors");

constexpr std::size_t kLengthBytes = 8;

struct Dtype {
  const char* word;
  torch::ScalarType type;
  uint64_t size;
};

constexpr Dtype kDtypes[] = {
    {"BOOL", torch::kBool, 1}, {"U8", torch::kByte, 1},    {"I8", torch::kChar, 1},  {"I16", torch::kShort, 2},
    {"I32", torch::kInt, 4},   {"I64", torch::kLong, 8},   {"F16", torch::kHalf, 2}, {"BF16", torch::kBFloat16, 2},
    {"F32", torch::kFloat, 4}, {"F64", torch::kDouble, 8},
};

// One tensor as the header describes it.
struct Entry {
  std::string name;
  const Dtype* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

class Parser {
 public:
  Parser(std::string_view bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}

  Safetensors parse() {
    if (bytes_.size() < kLengthBytes) {
      bad(fmt::format("it has {} bytes, fewer than the 8 of its header's length", bytes_.size()));
    }
    uint64_t length = 0;
    for (std::size_t i = 0; i < kLengthBytes; ++i) length |= uint64_t{static_cast<uint8_t>(bytes_[i])} << (8 * i);
    if (length > bytes_.size() - kLengthBytes) {
      bad(fmt::format("its header's length ({} bytes) runs past the end of the file ({} bytes)", length,
                      bytes_.size()));
    }
    const std::string_view header = bytes_.substr(kLengthBytes, length);
    data_ = bytes_.substr(kLengthBytes + length);
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(header.begin(), header.end());
    } catch (const nlohmann::json::exception& e) {
      // parse_error, or out_of_range for a number past a double (corpus/safetensors/found-crash-number-overflow).
      bad(fmt::format("its header is not valid JSON ({})", e.what()));
    }
    if (!json.is_object()) bad("its header is not a JSON object");
    Safetensors file;
    std::vector<Entry> entries;
    for (const auto& [key, value] : json.items()) {
      if (key == "__metadata__") {
        file.metadata = metadata(value);
      } else {
        entries.push_back(entry(key, value));
      }
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
    uint64_t next = 0;  // where the next tensor must start: the tensors tile the data
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
      if (e.begin < next) bad(fmt::format("tensor '{}' overlaps '{}'", e.name, previous->name));
      if (e.begin > next) bad(fmt::format("{} bytes before tensor '{}' belong to no tensor", e.begin - next, e.name));
      next = e.end;
      previous = &e;
    }
    if (next != data_.size())
      bad(fmt::format("{} bytes after its last tensor belong to no tensor", data_.size() - next));
    for (const Entry& e : entries) file.tensors.emplace_back(e.name, tensor(e));
    return file;
  }

 private:
  [[noreturn]] void bad(const std::string& problem) const {
    throw CheckpointError(fmt::format(
        "{}: not a valid safetensors file: {}; it was cut short, damaged or written by something else: write it "
        "again (safetensors.torch.save_file, or gputrain export --format safetensors)",
        name_, problem));
  }

  std::map<std::string, std::string> metadata(const nlohmann::json& value) const {
    std::map<std::string, std::string> out;
    if (value.is_object()) {
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) break;
        out.emplace(key, text.get<std::string>());
      }
      if (out.size() == value.size()) return out;
    }
    bad("its __metadata__ is not a map of strings to strings");
  }

  static bool is_offset(const nlohmann::json& value) { return value.is_number_unsigned(); }

  Entry entry(const std::string& key, const nlohmann::json& value) const {
    Entry e;
    e.name = key;
    const auto field = [&](const char* field_name) -> const nlohmann::json& {
      if (!value.is_object() || !value.contains(field_name)) {
        bad(fmt::format("tensor '{}' has no {}", key, field_name));
      }
      return value.at(field_name);
    };
    const nlohmann::json& dtype = field("dtype");
    for (const Dtype& d : kDtypes) {
      if (dtype.is_string() && dtype.get_ref<const std::string&>() == d.word) e.dtype = &d;
    }
    if (e.dtype == nullptr) {
      std::vector<std::string> known;
      for (const Dtype& d : kDtypes) known.emplace_back(d.word);
      bad(fmt::format("tensor '{}' has the dtype {}, which gputrain does not read (it reads {})", key, dtype.dump(),
                      fmt::join(known, ", ")));
    }
    const nlohmann::json& shape = field("shape");
    const nlohmann::json& offsets = field("data_offsets");
    if (!shape.is_array() || !std::all_of(shape.begin(), shape.end(), is_offset)) {
      bad(fmt::format("tensor '{}' has the shape {}, not a list of sizes", key, shape.dump()));
    }
    if (!offsets.is_array() || offsets.size() != 2 || !std::all_of(offsets.begin(), offsets.end(), is_offset)) {
      bad(fmt::format("tensor '{}' has the data_offsets {}, not [begin, end]", key, offsets.dump()));
    }
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_.size()) {
      bad(fmt::format("tensor '{}' has the data_offsets [{}, {}], outside the {} bytes of data", key, e.begin, e.end,
                      data_.size()));
    }
    // The bytes its shape needs; past 2^64 (overflow) no file holds them.
    uint64_t needed = e.dtype->size;
    bool overflow = false;
    for (const auto& size : shape) {
      const uint64_t side = size.get<uint64_t>();
      if (side > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        bad(fmt::format("tensor '{}' has the shape {}, larger than any tensor", key, shape.dump()));
      }
      e.shape.push_back(static_cast<int64_t>(side));
      overflow = overflow || (side != 0 && needed > std::numeric_limits<uint64_t>::max() / side);
      needed *= side;  // wraps on overflow, which a zero side below still makes 0
    }
    if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) overflow = false;
    if (overflow || needed != e.end - e.begin) {
      bad(fmt::format("tensor '{}' of shape {} and dtype {} needs {} bytes, but its data_offsets hold {}", key,
                      shape.dump(), e.dtype->word, overflow ? "more than 2^64" : std::to_string(needed),
                      e.end - e.begin));
    }
    return e;
  }

  torch::Tensor tensor(const Entry& e) const {
    torch::Tensor out;
    try {
      out = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype->type));
    } catch (const c10::Error& error) {
      bad(fmt::format("tensor '{}': {}", e.name, detail::torch_message(error)));
    }
    const std::string_view bytes = data_.substr(e.begin, e.end - e.begin);
    // Any other byte would be a bool C++ may not read (undefined behaviour).
    if (e.dtype->type == torch::kBool &&
        bytes.find_first_not_of(std::string_view("\0\1", 2)) != std::string_view::npos) {
      bad(fmt::format("tensor '{}' of dtype BOOL holds a byte that is neither 0 nor 1", e.name));
    }
    if (!bytes.empty()) std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
    return out;
  }

  std::string_view bytes_;
  std::string name_;
  std::string_view data_;  // after the header
};

const Dtype& dtype_of(const std::string& name, const torch::Tensor& tensor) {
  for (const Dtype& d : kDtypes) {
    if (d.type == tensor.scalar_type()) return d;
  }
  throw UserError(fmt::format("tensor '{}' is of type {}, which safetensors files gputrain writes do not hold", name,
                              c10::toString(tensor.scalar_type())));
}

}  // namespace

Safetensors parse_safetensors(std::string_view bytes, const std::string& name) { return Parser(bytes, name).parse(); }

Safetensors read_safetensors(const std::filesystem::path& path) {
  return parse_safetensors(detail::MappedFile(path).bytes(), path.string());
}

bool looks_like_safetensors(std::string_view bytes) {
  return bytes.size() > kLengthBytes && bytes[kLengthBytes] == '{';
}

std::string safetensors_bytes(const Safetensors& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::vector<torch::Tensor> tensors;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : file.tensors) {
    const Dtype& dtype = dtype_of(name, tensor);
    tensors.push_back(tensor.detach().cpu().contiguous());
    const uint64_t size = tensors.back().nbytes();
    header[name] = {
        {"dtype", dtype.word}, {"shape", tensors.back().sizes().vec()}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');
  std::string bytes;
  bytes.reserve(kLengthBytes + text.size() + offset);
  for (std::size_t i = 0; i < kLengthBytes; ++i)
    bytes.push_back(static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xFF));
  bytes += text;
  for (const torch::Tensor& t : tensors) bytes.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return bytes;
}

}  // namespace gputrain::checkpoint
