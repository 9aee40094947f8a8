// dataset: npy — the user's own arrays: train_inputs.npy, train_targets.npy,
// test_inputs.npy and test_targets.npy in data.root (what `gputrain datasets
// export` writes), or the same four arrays in one .npz (numpy.savez) named by
// data.root. Inputs of any sample shape and dtype float32/float64, any integer
// type or uint8; uint8 samples of [C, H, W] or [H, W] are images (normalize
// and augment apply). Integer targets [N] are classes, float targets [N] or
// [N, T] regression values.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <minizip/unzip.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "readers/readers.h"

namespace gputrain::data::detail {
namespace {

namespace fs = std::filesystem;

constexpr const char* kName = "npy";
constexpr char kMagic[] = "\x93NUMPY";

std::string array_name(Split split, const char* part) {
  return fmt::format("{}_{}", split == Split::kTrain ? "train" : "test", part);
}

// One array's bytes, from a file or an .npz member, named for messages.
struct NpyBytes {
  std::string where;  // "DIR/train_inputs.npy" or "FILE.npz:train_inputs.npy"
  std::string bytes;
};

struct DtypeInfo {
  torch::ScalarType type;
  int64_t size;
};

// NumPy's type strings that a data set may hold; '<' little-endian, '|' no order.
std::optional<DtypeInfo> dtype_of(const std::string& descr) {
  static const std::vector<std::pair<std::string, DtypeInfo>> kTypes{
      {"|u1", {torch::kUInt8, 1}},   {"<u1", {torch::kUInt8, 1}},   {"|i1", {torch::kInt8, 1}},
      {"<i1", {torch::kInt8, 1}},    {"<i2", {torch::kInt16, 2}},   {"<i4", {torch::kInt32, 4}},
      {"<i8", {torch::kInt64, 8}},   {"<f4", {torch::kFloat32, 4}}, {"<f8", {torch::kFloat64, 8}},
      {"<f2", {torch::kFloat16, 2}},
  };
  for (const auto& [name, info] : kTypes) {
    if (name == descr) return info;
  }
  return std::nullopt;
}

// What an .npy header says: enough to compare arrays without their data.
struct NpyHeader {
  std::string descr;  // "<f4"
  DtypeInfo dtype;
  std::vector<int64_t> shape;
  std::size_t data_start = 0;
};

DataError npy_error(const NpyBytes& file, const std::string& what) {
  return DataError(
      fmt::format("{}: {}: {}. Write it with numpy.save (or `gputrain datasets export`).", kName, file.where, what));
}

// Parses the header of the .npy format (versions 1 to 3); `file` may hold the
// header alone.
NpyHeader parse_header(const NpyBytes& file) {
  const std::string& b = file.bytes;
  auto bad = [&](const std::string& what) { return npy_error(file, what); };
  if (b.size() < 10 || b.compare(0, 6, kMagic, 6) != 0) throw bad("not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(b[6]);
  std::size_t header_start = 10;
  std::size_t header_length = static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8;
  if (major >= 2) {
    if (b.size() < 12) throw bad("truncated header");
    header_start = 12;
    header_length = 0;
    for (int i = 3; i >= 0; --i) header_length = header_length << 8 | static_cast<unsigned char>(b[8 + i]);
  } else if (major != 1) {
    throw bad(fmt::format("format version {} is not one of 1, 2, 3", major));
  }
  if (b.size() < header_start + header_length) throw bad("truncated header");
  const std::string header = b.substr(header_start, header_length);

  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')"))) throw bad("no 'descr' in the header");
  const std::string descr = m[1];
  const std::optional<DtypeInfo> dtype = dtype_of(descr);
  if (!dtype) {
    throw bad(
        fmt::format("dtype '{}' is not supported: use float32, float64, uint8 or a little-endian integer type "
                    "(numpy: array.astype('<f4'))",
                    descr));
  }
  if (std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*True)"))) {
    throw bad("stored in Fortran (column-major) order: save numpy.ascontiguousarray(array) instead");
  }
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) throw bad("no 'shape' in the header");
  std::vector<int64_t> shape;
  const std::string dims = m[1];
  // Each dimension a non-negative integer and their byte count exact: a damaged header's "-6" (read as 6)
  // or sizes whose product wraps around to the file's size must not pass the size check below.
  int64_t bytes_needed = dtype->size;
  const std::regex item(R"([^,]+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), item); it != std::sregex_iterator(); ++it) {
    const std::string text(trim(it->str()));
    if (text.empty()) continue;  // the comma closing a one-element tuple
    if (text.find_first_not_of("0123456789") != std::string::npos) {
      throw bad(fmt::format("shape ({}) is not a tuple of sizes (non-negative integers)", dims));
    }
    int64_t size = 0;
    const bool fits = std::from_chars(text.data(), text.data() + text.size(), size).ec == std::errc();
    shape.push_back(size);
    if (!fits || __builtin_mul_overflow(bytes_needed, size, &bytes_needed)) {
      throw bad(fmt::format("shape ({}) of {} needs more bytes than a file can hold", dims, descr));
    }
  }
  if (shape.empty()) throw bad("a scalar, not an array of samples");
  return {descr, *dtype, std::move(shape), header_start + header_length};
}

// Parses the .npy format (versions 1 to 3) into a CPU tensor of its dtype and shape.
torch::Tensor parse_npy(const NpyBytes& file) {
  const NpyHeader h = parse_header(file);
  const int64_t elements = std::accumulate(h.shape.begin(), h.shape.end(), int64_t{1}, std::multiplies<>());
  const auto expected = static_cast<std::size_t>(elements * h.dtype.size);
  if (file.bytes.size() - h.data_start != expected) {
    throw npy_error(file, fmt::format("shape ({}) of {} needs {} bytes of data, the file holds {}",
                                      fmt::join(h.shape, ", "), h.descr, expected, file.bytes.size() - h.data_start));
  }
  torch::Tensor tensor = torch::empty(h.shape, torch::TensorOptions().dtype(h.dtype.type));
  // An empty array's tensor has no storage (a null data pointer), which memcpy may not be given.
  if (expected > 0) std::memcpy(tensor.data_ptr(), file.bytes.data() + h.data_start, expected);
  return tensor;
}

// Where the four arrays are: a directory of .npy files or one .npz.
class NpySource {
 public:
  explicit NpySource(const std::string& root) : root_(root) {
    if (root.empty()) {
      throw DataError(
          fmt::format("{}: data.root is empty: set it to a directory holding train_inputs.npy, "
                      "train_targets.npy, test_inputs.npy and test_targets.npy, or to one .npz with those "
                      "arrays",
                      kName));
    }
    std::error_code error;
    npz_ = fs::is_regular_file(root, error);
    if (!npz_) require_directory(kName, root, "It must hold the .npy files, or be one .npz file.");
  }

  // The array `name` ("train_inputs"), or nullopt when absent; its first
  // `limit` bytes only, when it holds more.
  std::optional<NpyBytes> read(const std::string& name, std::size_t limit = SIZE_MAX) const {
    return npz_ ? read_member(name + ".npy", limit) : read_file(fs::path(root_) / (name + ".npy"), limit);
  }

  std::string expected(const std::string& name) const {
    return npz_ ? fmt::format("{} has no array '{}'", root_, name)
                : fmt::format("{} is missing", (fs::path(root_) / (name + ".npy")).string());
  }

 private:
  std::optional<NpyBytes> read_file(const fs::path& file, std::size_t limit) const {
    if (!is_data_file(kName, file)) return std::nullopt;
    std::ifstream in(file, std::ios::binary);
    NpyBytes out{file.string(), {}};
    if (limit == SIZE_MAX) {
      out.bytes.assign(std::istreambuf_iterator<char>(in), {});
    } else {
      out.bytes.resize(limit);
      in.read(out.bytes.data(), static_cast<std::streamsize>(limit));
      out.bytes.resize(static_cast<std::size_t>(in.gcount()));
    }
    if (!in && !in.eof()) throw DataError(fmt::format("{}: cannot read {}", kName, file.string()));
    return out;
  }

  std::optional<NpyBytes> read_member(const std::string& member, std::size_t limit) const {
    unzFile zip = unzOpen64(root_.c_str());
    if (zip == nullptr) {
      throw DataError(
          fmt::format("{}: {} is neither a directory nor an .npz (zip) file numpy.savez writes", kName, root_));
    }
    struct Closer {
      unzFile zip;
      ~Closer() { unzClose(zip); }
    } closer{zip};
    if (!locate_last(zip, member)) return std::nullopt;
    unz_file_info64 info{};
    NpyBytes out{fmt::format("{}:{}", root_, member), {}};
    if (unzGetCurrentFileInfo64(zip, &info, nullptr, 0, nullptr, 0, nullptr, 0) != UNZ_OK) {
      throw DataError(fmt::format("{}: {}: cannot open the member (a damaged .npz?)", kName, out.where));
    }
    // minizip inflates stored and deflated members only, which is what numpy writes.
    if (info.compression_method != 0 && info.compression_method != Z_DEFLATED) {
      throw DataError(fmt::format(
          "{}: {}: the member is compressed with {} (zip method {}), which gputrain cannot read; numpy's savez "
          "and savez_compressed write stored or deflated members: save the arrays with one of them",
          kName, out.where, zip_method_name(info.compression_method), info.compression_method));
    }
    if (unzOpenCurrentFile(zip) != UNZ_OK) {
      throw DataError(fmt::format("{}: {}: cannot open the member (a damaged .npz?)", kName, out.where));
    }
    const bool whole = limit >= info.uncompressed_size;
    out.bytes.resize(whole ? info.uncompressed_size : limit);
    std::size_t done = 0;
    while (done < out.bytes.size()) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(out.bytes.size() - done, 1u << 30));
      const int got = unzReadCurrentFile(zip, out.bytes.data() + done, chunk);
      if (got <= 0) break;
      done += static_cast<std::size_t>(got);
    }
    // UNZ_CRCERROR on a damaged member; its checksum is checked only when read to the end.
    const bool checked = unzCloseCurrentFile(zip) == UNZ_OK || !whole;
    if (done != out.bytes.size() || !checked) {
      throw DataError(
          fmt::format("{}: {}: the member is truncated or fails its checksum (a damaged .npz?)", kName, out.where));
    }
    return out;
  }

  // Makes the last member named `member` current, as numpy (Python's
  // zipfile) reads a name written twice; false when there is none.
  static bool locate_last(unzFile zip, const std::string& member) {
    std::optional<unz64_file_pos> last;
    for (int at = unzGoToFirstFile(zip); at == UNZ_OK; at = unzGoToNextFile(zip)) {
      std::string name(member.size() + 2, '\0');  // room to tell a longer name from this one
      if (unzGetCurrentFileInfo64(zip, nullptr, name.data(), name.size(), nullptr, 0, nullptr, 0) != UNZ_OK) break;
      if (name.c_str() != member) continue;
      last.emplace();
      unzGetFilePos64(zip, &*last);
    }
    return last && unzGoToFilePos64(zip, &*last) == UNZ_OK;
  }

  static std::string zip_method_name(unsigned long method) {
    switch (method) {
      case 12:
        return "bzip2";
      case 14:
        return "LZMA";
      case 93:
        return "Zstandard";
      case 95:
        return "xz";
      case 98:
        return "PPMd";
      default:
        return "another method";
    }
  }

  std::string root_;
  bool npz_ = false;
};

NpyBytes require(const NpySource& source, const std::string& name) {
  std::optional<NpyBytes> bytes = source.read(name);
  if (!bytes) {
    throw DataError(
        fmt::format("{}: {}. The npy data set reads train_inputs, train_targets, test_inputs and "
                    "test_targets (`gputrain datasets export` writes them).",
                    kName, source.expected(name)));
  }
  return *bytes;
}

bool is_integer(torch::ScalarType type) { return c10::isIntegralType(type, /*includeBool=*/false); }

// The highest label in `labels` (integer, of the array at `where`); a negative
// one, or one of kMaxClasses or more, is an error.
int64_t highest_label(const torch::Tensor& labels, const std::string& where) {
  if (labels.numel() == 0) return -1;
  const torch::Tensor flat = labels.flatten().to(torch::kInt64);
  const torch::Tensor out_of_range = (flat < 0).logical_or(flat >= kMaxClasses);
  if (out_of_range.any().item<bool>()) {
    const int64_t at = out_of_range.nonzero()[0][0].item<int64_t>();
    throw DataError(fmt::format(
        "{}: {}: sample {} has label {}; class labels run from 0 to classes - 1, and at most {} classes are "
        "supported (for regression values, store the targets as floats)",
        kName, where, at, flat[at].item<int64_t>(), kMaxClasses));
  }
  return flat.max().item<int64_t>();
}

// Enough bytes of an .npy file for its header.
constexpr std::size_t kHeaderBytes = std::size_t{1} << 20;

// What a split's arrays give the model, from their headers alone, as
// read_npy's rules make them: {inputs, targets}, e.g. {"uint8 images of
// [1, 28, 28]", "class labels"}.
std::pair<std::string, std::string> split_kind(const NpyHeader& inputs, const NpyHeader& targets) {
  const std::vector<int64_t>& in = inputs.shape;
  const bool images = inputs.dtype.type == torch::kUInt8 && (in.size() == 3 || in.size() == 4);
  std::vector<int64_t> sample(in.begin() + 1, in.end());
  if (images && sample.size() == 2) sample.insert(sample.begin(), 1);
  if (sample.empty()) sample = {1};
  std::string input_kind = fmt::format("{} of [{}]", images ? "uint8 images" : "features", fmt::join(sample, ", "));
  const std::vector<int64_t>& t = targets.shape;
  std::string target_kind = is_integer(targets.dtype.type)
                                ? std::string("integer class labels")
                                : fmt::format("float regression targets, {} a sample", t.size() > 1 ? t[1] : 1);
  return {std::move(input_kind), std::move(target_kind)};
}

// The two splits feed one model: refuses (DataError naming both files) a test
// split whose samples or targets differ in kind or shape from the training
// split's, before a run fails on them mid-epoch. Reads the other split's headers only.
void check_splits_agree(const NpySource& source, Split split, const NpyBytes& inputs, const NpyBytes& targets) {
  const Split other_split = split == Split::kTrain ? Split::kTest : Split::kTrain;
  const std::optional<NpyBytes> other_inputs = source.read(array_name(other_split, "inputs"), kHeaderBytes);
  const std::optional<NpyBytes> other_targets = source.read(array_name(other_split, "targets"), kHeaderBytes);
  if (!other_inputs || !other_targets) return;  // that split's own load says what is missing
  const bool train = split == Split::kTrain;
  const auto mine = split_kind(parse_header(inputs), parse_header(targets));
  const auto other = split_kind(parse_header(*other_inputs), parse_header(*other_targets));
  const auto& train_kind = train ? mine : other;
  const auto& test_kind = train ? other : mine;
  const auto refuse = [](const NpyBytes& a, const std::string& a_kind, const NpyBytes& b, const std::string& b_kind) {
    throw DataError(
        fmt::format("{}: {} holds {} but {} holds {}; the training and test splits feed one model, so their arrays "
                    "must agree in dtype and sample shape",
                    kName, a.where, a_kind, b.where, b_kind));
  };
  if (train_kind.first != test_kind.first) {
    refuse(train ? inputs : *other_inputs, train_kind.first, train ? *other_inputs : inputs, test_kind.first);
  }
  if (train_kind.second != test_kind.second) {
    refuse(train ? targets : *other_targets, train_kind.second, train ? *other_targets : targets, test_kind.second);
  }
}

// Labels must be whole classes 0..classes-1; the classes count comes from
// this split's labels and the other split's together, so both splits agree.
int64_t count_classes(const NpySource& source, Split split, const torch::Tensor& labels, const std::string& where) {
  int64_t highest = highest_label(labels, where);
  const Split other_split = split == Split::kTrain ? Split::kTest : Split::kTrain;
  if (const std::optional<NpyBytes> other = source.read(array_name(other_split, "targets"))) {
    const torch::Tensor other_labels = parse_npy(*other);
    if (is_integer(other_labels.scalar_type())) highest = std::max(highest, highest_label(other_labels, other->where));
  }
  return highest + 1;
}

// A NaN or inf value makes the loss NaN at its batch, which train.on_nan would
// blame on the learning rate: refused here, naming the first sample that holds one.
void refuse_non_finite(const torch::Tensor& values, const std::string& where) {
  const torch::Tensor bad = values.reshape({values.size(0), -1}).isfinite().logical_not().any(1);
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return;
  throw DataError(
      fmt::format("{}: {}: sample {} holds NaN or inf ({} of the {} samples do); replace or drop "
                  "those values: each makes its batch's loss NaN",
                  kName, where, bad.nonzero()[0][0].item<int64_t>(), count, values.size(0)));
}

}  // namespace

torch::Tensor as_samples(torch::Tensor inputs, bool& images) {
  // uint8 [N, C, H, W] or [N, H, W]: images, kept as bytes like CIFAR's; anything else: float32 features.
  images = inputs.scalar_type() == torch::kUInt8 && (inputs.dim() == 4 || inputs.dim() == 3);
  if (images && inputs.dim() == 3) inputs = inputs.unsqueeze(1);
  if (!images) inputs = inputs.to(torch::kFloat32);
  if (inputs.dim() == 1) inputs = inputs.unsqueeze(1);
  return inputs.contiguous();
}

torch::Tensor read_npy_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: {}: cannot be opened for reading", kName, file));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return parse_npy(NpyBytes{file, bytes.str()});
}

std::shared_ptr<const Dataset> read_npy(const std::string& root, Split split) {
  const NpySource source(root);
  const NpyBytes input_bytes = require(source, array_name(split, "inputs"));
  const NpyBytes target_bytes = require(source, array_name(split, "targets"));
  torch::Tensor inputs = parse_npy(input_bytes);
  torch::Tensor targets = parse_npy(target_bytes);
  const int64_t samples = inputs.size(0);
  if (samples == 0) {
    throw DataError(fmt::format("{}: {}: holds no samples (shape ({})); the {} split needs at least one", kName,
                                input_bytes.where, fmt::join(inputs.sizes(), ", "),
                                split == Split::kTrain ? "training" : "test"));
  }
  if (inputs.numel() == 0) {
    throw DataError(
        fmt::format("{}: {}: shape ({}) leaves each sample no values (a dimension of 0); every sample "
                    "needs at least one feature",
                    kName, input_bytes.where, fmt::join(inputs.sizes(), ", ")));
  }
  if (targets.size(0) != samples) {
    throw DataError(fmt::format("{}: {} holds {} samples but {} holds {}: inputs and targets must pair up", kName,
                                input_bytes.where, samples, target_bytes.where, targets.size(0)));
  }

  check_splits_agree(source, split, input_bytes, target_bytes);

  DatasetInfo info;
  info.name = kName;
  info.source = root;
  info.samples = samples;
  inputs = as_samples(inputs, info.images);
  if (!info.images) refuse_non_finite(inputs, input_bytes.where);
  info.input_shape = inputs.sizes().slice(1).vec();

  if (is_integer(targets.scalar_type())) {
    if (targets.dim() == 2 && targets.size(1) == 1) targets = targets.squeeze(1);
    if (targets.dim() != 1) {
      throw DataError(
          fmt::format("{}: {}: integer targets are class labels, one per sample (shape [N]), not shape "
                      "[{}]",
                      kName, target_bytes.where, fmt::join(targets.sizes(), ", ")));
    }
    info.target_kind = TargetKind::kClasses;
    info.classes = count_classes(source, split, targets, target_bytes.where);
    targets = targets.to(torch::kInt64);
  } else {
    if (targets.dim() == 1) targets = targets.unsqueeze(1);
    if (targets.dim() != 2) {
      throw DataError(fmt::format("{}: {}: float targets are regression values of shape [N] or [N, T], not [{}]", kName,
                                  target_bytes.where, fmt::join(targets.sizes(), ", ")));
    }
    info.target_kind = TargetKind::kValues;
    info.targets = targets.size(1);
    targets = targets.to(torch::kFloat32);
    refuse_non_finite(targets, target_bytes.where);
  }
  return std::make_shared<TensorDataset>(std::move(info), inputs.contiguous(), targets.contiguous(),
                                         std::vector<TensorDataset::Part>{{input_bytes.where, samples}});
}

}  // namespace gputrain::data::detail
