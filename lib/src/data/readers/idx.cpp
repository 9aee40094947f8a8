// MNIST and Fashion-MNIST: four IDX files (formats.h), raw or gzip-compressed.
// zlib's gz* functions read both, so one reader serves either; where both a
// raw file and its .gz exist the raw one wins (no inflating, and it is what a
// user who unpacked the files meant to use).
#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "gputrain/common/error.h"
#include "readers/formats.h"
#include "readers/readers.h"

namespace gputrain::data::detail {
namespace {

namespace fs = std::filesystem;

// Deflate's best possible ratio: no valid .gz file inflates to more than this
// many times its size, which bounds what a header may promise before we
// allocate for it.
constexpr int64_t kMaxDeflateRatio = 1032;

std::string hint(config::DatasetName dataset) {
  const std::string make =
      "or write a small stand-in with `gputrain datasets make-idx --out DIR`; see datasets/README.md.";
  if (dataset == config::DatasetName::kFashionMnist) {
    return "Run `gputrain datasets download fashion_mnist --root DIR` and set data.root to DIR, or install Debian's "
           "dataset-fashion-mnist package (it puts the four .gz files in /usr/share/datasets/fashion-mnist), " +
           make;
  }
  return "Run `gputrain datasets download mnist` (into datasets/mnist), or put the four MNIST IDX files "
         "(train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, raw or "
         ".gz) in data.root, " +
         make;
}

std::optional<fs::path> find_file(const std::string& name, const std::string& root, const std::string& base) {
  for (const fs::path& candidate : {fs::path(root) / base, fs::path(root) / (base + ".gz")}) {
    if (is_data_file(name, candidate)) return candidate;
  }
  return std::nullopt;
}

// One IDX file opened through zlib, with every read checked.
class IdxReader {
 public:
  IdxReader(std::string dataset, const fs::path& file) : dataset_(std::move(dataset)), file_(file.string()) {
    std::error_code error;
    disk_bytes_ = static_cast<int64_t>(fs::file_size(file, error));
    gz_ = error ? nullptr : gzopen(file_.c_str(), "rb");
    if (gz_ == nullptr) {
      throw DataError(
          fmt::format("{}: cannot open {}: {}", dataset_, file_, error ? error.message() : std::strerror(errno)));
    }
  }
  ~IdxReader() { gzclose(gz_); }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  const std::string& file() const { return file_; }

  // Reads the magic number and `rank` sizes; returns the sizes.
  std::vector<int64_t> read_header(uint32_t magic, int rank, const char* kind) {
    const uint32_t found = read_u32("header");
    if (found != magic) {
      fail(fmt::format("magic number 0x{:08x}, expected 0x{:08x} (IDX unsigned bytes in {} dimensions, the {} file)",
                       found, magic, rank, kind));
    }
    std::vector<int64_t> sizes;
    for (int i = 0; i < rank; ++i) sizes.push_back(read_u32("header"));
    return sizes;
  }

  // Checks that the file can hold the `bytes` of `what` its header promises,
  // before anything is allocated for them: a corrupt header may promise
  // terabytes.
  void check_promise(int64_t bytes, const std::string& what) const {
    const int64_t header = static_cast<int64_t>(gztell(gz_));
    if (gzdirect(gz_)) {
      // Uncompressed: the size on disk must match exactly.
      if (disk_bytes_ != header + bytes) {
        fail(fmt::format("holds {} bytes but its header promises {} + {} bytes of {}: the file is {}", disk_bytes_,
                         header, bytes, what, disk_bytes_ < header + bytes ? "truncated" : "too long"));
      }
    } else if (header + bytes > kMaxDeflateRatio * disk_bytes_) {
      fail(
          fmt::format("its header promises {} bytes of {}, more than a {}-byte gzip file can hold: it is truncated "
                      "or corrupt",
                      bytes, what, disk_bytes_));
    }
  }

  // Reads exactly the `bytes` of `what` (checked by check_promise), and checks
  // that nothing follows them.
  void read_payload(uint8_t* out, int64_t bytes, const std::string& what) {
    constexpr int64_t kChunk = int64_t{1} << 26;  // gzread takes an unsigned int
    for (int64_t done = 0; done < bytes;) {
      const auto want = static_cast<unsigned>(std::min(kChunk, bytes - done));
      const int got = gzread(gz_, out + done, want);
      if (got <= 0) read_failed(what);
      done += got;
    }
    uint8_t extra = 0;
    if (gzread(gz_, &extra, 1) > 0) fail(fmt::format("has bytes after the {} its header promises", what));
    int code = Z_OK;
    gzerror(gz_, &code);
    if (code != Z_OK) read_failed("gzip trailer");
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw DataError(
        fmt::format("{}: {}: {}. Download the file again; see datasets/README.md.", dataset_, file_, problem));
  }

 private:
  // A read that came up short: says why, from zlib's state.
  [[noreturn]] void read_failed(const std::string& part) const {
    int code = Z_OK;
    std::string message = gzerror(gz_, &code);
    if (message.rfind(file_ + ": ", 0) == 0) message.erase(0, file_.size() + 2);  // zlib prefixes the path
    if (code == Z_OK) fail(fmt::format("ends inside its {}: the file is truncated", part));
    if (code == Z_BUF_ERROR) fail(fmt::format("ends inside its {}: truncated gzip stream", part));
    if (code == Z_ERRNO) fail(fmt::format("cannot be read: {}", std::strerror(errno)));
    fail(fmt::format("corrupt gzip stream in its {} ({})", part, message));
  }

  uint32_t read_u32(const char* what) {
    unsigned char bytes[4];
    if (gzread(gz_, bytes, 4) != 4) read_failed(what);
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
  }

  std::string dataset_;
  std::string file_;
  int64_t disk_bytes_ = 0;
  gzFile gz_ = nullptr;
};

}  // namespace

std::shared_ptr<const Dataset> read_idx(config::DatasetName dataset, const std::string& root, Split split) {
  const std::string name = config::word(dataset);
  require_directory(name, root, hint(dataset));
  const IdxNames names = idx_names(split);
  std::vector<std::string> missing;
  const std::optional<fs::path> images_file = find_file(name, root, names.images);
  const std::optional<fs::path> labels_file = find_file(name, root, names.labels);
  if (!images_file) missing.push_back(names.images + std::string("[.gz]"));
  if (!labels_file) missing.push_back(names.labels + std::string("[.gz]"));
  if (!missing.empty()) {
    throw DataError(fmt::format("{}: {} lacks {}. {}", name, root, fmt::join(missing, " and "), hint(dataset)));
  }

  IdxReader images_in(name, *images_file);
  const std::vector<int64_t> dims = images_in.read_header(kIdxImagesMagic, 3, "images");
  if (dims[0] == 0) images_in.fail("holds no images");
  if (dims[1] != kIdxSide || dims[2] != kIdxSide) {
    images_in.fail(fmt::format("images are {}x{} pixels, expected {}x{}", dims[1], dims[2], kIdxSide, kIdxSide));
  }
  const int64_t count = dims[0];
  const std::string images_what = fmt::format("{} images", count);
  images_in.check_promise(count * kIdxSide * kIdxSide, images_what);
  torch::Tensor images = torch::empty({count, 1, kIdxSide, kIdxSide}, torch::kUInt8);
  images_in.read_payload(images.data_ptr<uint8_t>(), images.numel(), images_what);

  IdxReader labels_in(name, *labels_file);
  const int64_t label_count = labels_in.read_header(kIdxLabelsMagic, 1, "labels")[0];
  if (label_count != count) {
    labels_in.fail(fmt::format("holds {} labels but {} holds {} images; both must come from the same release",
                               label_count, images_in.file(), count));
  }
  const std::string labels_what = fmt::format("{} labels", count);
  labels_in.check_promise(count, labels_what);
  std::vector<uint8_t> bytes(static_cast<std::size_t>(count));
  labels_in.read_payload(bytes.data(), count, labels_what);
  torch::Tensor labels = torch::empty({count}, torch::kInt64);
  int64_t* label = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    if (bytes[i] >= kImageClasses) {
      labels_in.fail(fmt::format("label {} of sample {} is outside 0..{}", bytes[i], i, kImageClasses - 1));
    }
    label[i] = bytes[i];
  }

  return std::make_shared<TensorDataset>(image_info(name, root, count, {1, kIdxSide, kIdxSide}), std::move(images),
                                         std::move(labels),
                                         std::vector<TensorDataset::Part>{{images_in.file(), count}});
}

}  // namespace gputrain::data::detail
