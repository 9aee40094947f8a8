#include "gputrain/data/generate.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <functional>
#include <new>
#include <optional>
#include <string>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "loaders/rng.h"
#include "readers/formats.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using detail::derive_seed;
using detail::SplitMix64;

constexpr int64_t kGrid = 4;  // template cells per side

void make_directory(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw DataError(fmt::format("cannot create {}: {}", dir.string(), error.message()));
}

// The IDX format counts in 32 bits; 1,000,000 images (20 times the real sets)
// is 784 MB as IDX and 3 GB as CIFAR-10, far more than a stand-in needs.
constexpr int64_t kMaxGeneratedImages = 1'000'000;

void require_count(const char* what, int64_t count, int64_t minimum) {
  if (count < minimum) throw UserError(fmt::format("{} must be >= {} (got {})", what, minimum, count));
  if (count > kMaxGeneratedImages) {
    throw UserError(fmt::format("{} must be <= {} (got {}); the real sets hold 50000 to 60000 training images", what,
                                kMaxGeneratedImages, count));
  }
}

// Draws the images of make_image_set in order, so that a writer holds one
// chunk of them and not the set: only the shuffled labels (a byte an image)
// are kept whole.
class ImageGenerator {
 public:
  ImageGenerator(int64_t count, int64_t channels, int64_t side, uint64_t seed, Split split)
      : channels_(channels), side_(side), rng_(derive_seed(seed, split == Split::kTrain ? 1 : 2)) {
    SplitMix64 template_rng(derive_seed(seed, 0));
    templates_.resize(static_cast<std::size_t>(detail::kImageClasses * channels * kGrid * kGrid));
    for (uint8_t& cell : templates_) cell = static_cast<uint8_t>(template_rng.next());
    labels_.resize(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) labels_[i] = static_cast<uint8_t>(i % detail::kImageClasses);
    for (std::size_t i = labels_.size(); i > 1; --i) std::swap(labels_[i - 1], labels_[rng_.below(i)]);
  }

  const std::vector<uint8_t>& labels() const { return labels_; }
  int64_t image_bytes() const { return channels_ * side_ * side_; }

  // Writes the next image's image_bytes() pixels to `out`; returns its label.
  uint8_t next(uint8_t* out) {
    const uint8_t label = labels_.at(static_cast<std::size_t>(drawn_++));
    const uint8_t* cells = templates_.data() + label * channels_ * kGrid * kGrid;
    for (int64_t c = 0; c < channels_; ++c) {
      for (int64_t y = 0; y < side_; ++y) {
        const uint8_t* row = cells + (c * kGrid + y * kGrid / side_) * kGrid;
        for (int64_t x = 0; x < side_; ++x) {
          if (noise_left_ == 0) {
            noise_ = rng_.next();
            noise_left_ = 8;
          }
          const int value = row[x * kGrid / side_] + static_cast<int>(noise_ & 127) - 64;
          noise_ >>= 8;
          --noise_left_;
          *out++ = static_cast<uint8_t>(std::clamp(value, 0, 255));
        }
      }
    }
    return label;
  }

 private:
  int64_t channels_, side_;
  SplitMix64 rng_;
  std::vector<uint8_t> templates_, labels_;
  int64_t drawn_ = 0;
  uint64_t noise_ = 0;
  int64_t noise_left_ = 0;  // bytes of noise_ not used yet: one draw feeds eight pixels
};

constexpr int64_t kImagesPerPiece = 1024;  // 3 MB of CIFAR-10 records at a time

// Passes `count` images of `images` to `sink`, kImagesPerPiece at a time, each
// preceded by its label byte when `with_labels` (CIFAR-10's records).
void stream_images(ImageGenerator& images, int64_t count, bool with_labels, const ByteSink& sink) {
  const int64_t record = images.image_bytes() + (with_labels ? 1 : 0);
  std::string piece;
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(kImagesPerPiece, count - done);
    piece.resize(static_cast<std::size_t>(n * record));
    auto* out = reinterpret_cast<uint8_t*>(piece.data());
    for (int64_t i = 0; i < n; ++i, out += record) {
      if (with_labels) {
        out[0] = images.next(out + 1);
      } else {
        images.next(out);
      }
    }
    sink(piece);
    done += n;
  }
}

// Compresses what it is given as one gzip member into `file_sink`.
class GzipSink {
 public:
  explicit GzipSink(const ByteSink& file_sink) : file_sink_(file_sink) {
    // 15 + 16: a 32 KiB window, written with gzip's header and trailer.
    if (deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw std::bad_alloc();
    }
  }
  ~GzipSink() { deflateEnd(&z_); }
  GzipSink(const GzipSink&) = delete;
  GzipSink& operator=(const GzipSink&) = delete;

  void write(std::string_view bytes) { deflate_all(bytes, Z_NO_FLUSH); }
  void finish() { deflate_all({}, Z_FINISH); }

 private:
  void deflate_all(std::string_view bytes, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z_.avail_in = static_cast<uInt>(bytes.size());  // pieces are far below 4 GiB
    std::array<char, 1 << 16> out{};
    int status = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out.data());
      z_.avail_out = static_cast<uInt>(out.size());
      status = deflate(&z_, flush);
      file_sink_(std::string_view(out.data(), out.size() - z_.avail_out));
    } while (z_.avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END));
  }

  const ByteSink& file_sink_;
  z_stream z_{};
};

// Writes `file` through `produce`, gzip-compressed when `gzip`, atomically.
void write_file(const fs::path& file, bool gzip, const std::function<void(const ByteSink&)>& produce) {
  write_atomically_in_pieces(file, [&](const ByteSink& file_sink) {
    if (!gzip) return produce(file_sink);
    GzipSink compressed(file_sink);
    produce([&](std::string_view piece) { compressed.write(piece); });
    compressed.finish();
  });
}

std::string big_endian_u32s(std::initializer_list<int64_t> values) {
  std::string bytes;
  for (const int64_t value : values) {
    const auto word = static_cast<uint32_t>(value);
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(word >> shift));
  }
  return bytes;
}

// Writes `files` into `dir` one after another by `write(file)`. An existing
// set is replaced only when `overwrite`; if a file fails, those already
// written are removed again, so a failed run leaves no set that looks whole.
void write_set(const fs::path& dir, const std::vector<fs::path>& files, bool overwrite,
               const std::function<void(const fs::path&)>& write) {
  if (!overwrite) {
    for (const fs::path& file : files) {
      std::error_code error;
      if (fs::exists(dir / file, error)) {
        throw UserError(
            fmt::format("{}: holds a data set already ({}); add --force to overwrite it, or choose "
                        "another --out",
                        dir.string(), file.string()));
      }
    }
  }
  make_directory(dir);
  std::vector<fs::path> written;
  try {
    for (const fs::path& file : files) {
      write(dir / file);
      written.push_back(dir / file);
    }
  } catch (...) {
    std::error_code ignored;
    for (const fs::path& path : written) fs::remove(path, ignored);
    throw;
  }
}

}  // namespace

ImageSet make_image_set(int64_t count, int64_t channels, int64_t side, uint64_t seed, Split split) {
  ImageGenerator images(count, channels, side, seed, split);
  ImageSet set{channels, side, side, {}, images.labels()};
  set.pixels.resize(static_cast<std::size_t>(count * images.image_bytes()));
  for (int64_t i = 0; i < count; ++i) images.next(set.pixels.data() + i * images.image_bytes());
  return set;
}

void write_cifar10_set(const fs::path& dir, const GenerateOptions& options) {
  const auto files = static_cast<int64_t>(detail::kCifarTrainFiles.size());
  require_count("the number of training images (one at least in each of data_batch_1..5.bin)", options.train, files);
  require_count("the number of test images", options.test, 1);
  std::vector<fs::path> names(detail::kCifarTrainFiles.begin(), detail::kCifarTrainFiles.end());
  names.emplace_back(detail::kCifarTestFile);
  ImageGenerator train(options.train, detail::kCifarChannels, detail::kCifarSide, options.seed, Split::kTrain);
  ImageGenerator test(options.test, detail::kCifarChannels, detail::kCifarSide, options.seed, Split::kTest);
  int64_t k = 0;
  write_set(dir, names, options.overwrite, [&](const fs::path& file) {
    // The training images in order over the five files, sizes differing by one at most.
    const int64_t count = k < files ? options.train / files + (k < options.train % files ? 1 : 0) : options.test;
    ImageGenerator& images = k++ < files ? train : test;
    write_file(file, /*gzip=*/false, [&](const ByteSink& sink) { stream_images(images, count, true, sink); });
  });
}

void write_idx_set(const fs::path& dir, const GenerateOptions& options, bool gzip) {
  require_count("the number of training images", options.train, 1);
  require_count("the number of test images", options.test, 1);
  const std::string suffix = gzip ? ".gz" : "";
  std::vector<fs::path> names;
  for (const Split split : {Split::kTrain, Split::kTest}) {
    names.emplace_back(detail::idx_names(split).images + suffix);
    names.emplace_back(detail::idx_names(split).labels + suffix);
  }
  std::optional<ImageGenerator> images;
  int64_t k = 0;
  write_set(dir, names, options.overwrite, [&](const fs::path& file) {
    const Split split = k < 2 ? Split::kTrain : Split::kTest;
    const int64_t count = split == Split::kTrain ? options.train : options.test;
    if (k++ % 2 == 0) {
      images.emplace(count, 1, detail::kIdxSide, options.seed, split);
      write_file(file, gzip, [&](const ByteSink& sink) {
        sink(big_endian_u32s({detail::kIdxImagesMagic, count, detail::kIdxSide, detail::kIdxSide}));
        stream_images(*images, count, false, sink);
      });
    } else {
      const std::vector<uint8_t>& labels = images->labels();
      write_file(file, gzip, [&](const ByteSink& sink) {
        sink(big_endian_u32s({detail::kIdxLabelsMagic, count}));
        sink(std::string_view(reinterpret_cast<const char*>(labels.data()), labels.size()));
      });
    }
  });
}

}  // namespace gputrain::data
