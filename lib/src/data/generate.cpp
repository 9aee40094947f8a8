#include "gputrain/data/generate.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "formats.h"
#include "gputrain/common/error.h"
#include "rng.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using detail::derive_seed;
using detail::SplitMix64;

constexpr int64_t kGrid = 4;  // template cells per side

void write_bytes(const fs::path& file, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile gz = gzopen(file.c_str(), "wb");
    bool ok = gz != nullptr;
    // gzwrite takes an unsigned int, so write in chunks.
    constexpr std::size_t kChunk = std::size_t{1} << 26;
    for (std::size_t done = 0; ok && done < bytes.size(); done += kChunk) {
      const auto n = static_cast<unsigned>(std::min(kChunk, bytes.size() - done));
      ok = gzwrite(gz, bytes.data() + done, n) == static_cast<int>(n);
    }
    if (gz != nullptr && gzclose(gz) != Z_OK) ok = false;
    if (!ok) throw DataError(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
    return;
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw DataError(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
}

void append_u32(std::vector<uint8_t>& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(value >> shift));
}

void make_directory(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw DataError(fmt::format("cannot create {}: {}", dir.string(), error.message()));
}

// A stand-in set is built in memory before it is written: 1,000,000 images
// (20 times the real sets) is 784 MB as IDX and 3 GB as CIFAR-10, and well
// inside the IDX format's 32-bit count.
constexpr int64_t kMaxGeneratedImages = 1'000'000;

void require_count(const char* what, int64_t count, int64_t minimum) {
  if (count < minimum) throw UserError(fmt::format("{} must be >= {} (got {})", what, minimum, count));
  if (count > kMaxGeneratedImages) {
    throw UserError(fmt::format("{} must be <= {} (got {}); a stand-in set is built in memory, and the real sets "
                                "hold 50000 to 60000 training images",
                                what, kMaxGeneratedImages, count));
  }
}

}  // namespace

ImageSet make_image_set(int64_t count, int64_t channels, int64_t side, uint64_t seed, Split split) {
  ImageSet set{channels, side, side, {}, {}};
  const int64_t plane = side * side, image = channels * plane;

  SplitMix64 template_rng(derive_seed(seed, 0));
  std::vector<uint8_t> templates(static_cast<std::size_t>(detail::kImageClasses * channels * kGrid * kGrid));
  for (uint8_t& cell : templates) cell = static_cast<uint8_t>(template_rng.next());

  SplitMix64 rng(derive_seed(seed, split == Split::kTrain ? 1 : 2));
  set.labels.resize(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) set.labels[i] = static_cast<uint8_t>(i % detail::kImageClasses);
  for (std::size_t i = set.labels.size(); i > 1; --i) std::swap(set.labels[i - 1], set.labels[rng.below(i)]);

  set.pixels.resize(static_cast<std::size_t>(count * image));
  uint8_t* out = set.pixels.data();
  uint64_t noise = 0;
  int64_t noise_left = 0;  // bytes of `noise` not used yet: one draw feeds eight pixels
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* cells = templates.data() + set.labels[i] * channels * kGrid * kGrid;
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t y = 0; y < side; ++y) {
        const uint8_t* row = cells + (c * kGrid + y * kGrid / side) * kGrid;
        for (int64_t x = 0; x < side; ++x) {
          if (noise_left == 0) {
            noise = rng.next();
            noise_left = 8;
          }
          const int value = row[x * kGrid / side] + static_cast<int>(noise & 127) - 64;
          noise >>= 8;
          --noise_left;
          *out++ = static_cast<uint8_t>(std::clamp(value, 0, 255));
        }
      }
    }
  }
  return set;
}

void write_cifar10_file(const fs::path& file, const ImageSet& set, int64_t begin, int64_t end) {
  const int64_t image = set.channels * set.height * set.width;
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>((end - begin) * (1 + image)));
  for (int64_t i = begin; i < end; ++i) {
    bytes.push_back(set.labels[i]);
    bytes.insert(bytes.end(), set.pixels.begin() + i * image, set.pixels.begin() + (i + 1) * image);
  }
  write_bytes(file, bytes, /*gzip=*/false);
}

void write_idx_files(const fs::path& images, const fs::path& labels, const ImageSet& set, bool gzip) {
  std::vector<uint8_t> bytes;
  append_u32(bytes, detail::kIdxImagesMagic);
  for (int64_t size : {set.size(), set.height, set.width}) append_u32(bytes, static_cast<uint32_t>(size));
  bytes.insert(bytes.end(), set.pixels.begin(), set.pixels.end());
  write_bytes(images, bytes, gzip);

  bytes.clear();
  append_u32(bytes, detail::kIdxLabelsMagic);
  append_u32(bytes, static_cast<uint32_t>(set.size()));
  bytes.insert(bytes.end(), set.labels.begin(), set.labels.end());
  write_bytes(labels, bytes, gzip);
}

void write_cifar10_set(const fs::path& dir, const GenerateOptions& options) {
  const auto files = static_cast<int64_t>(detail::kCifarTrainFiles.size());
  require_count("the number of training images (one at least in each of data_batch_1..5.bin)", options.train, files);
  require_count("the number of test images", options.test, 1);
  make_directory(dir);
  const ImageSet train = make_image_set(options.train, detail::kCifarChannels, detail::kCifarSide, options.seed,
                                        Split::kTrain);
  int64_t begin = 0;
  for (int64_t k = 0; k < files; ++k) {
    const int64_t end = begin + options.train / files + (k < options.train % files ? 1 : 0);
    write_cifar10_file(dir / detail::kCifarTrainFiles[k], train, begin, end);
    begin = end;
  }
  const ImageSet test =
      make_image_set(options.test, detail::kCifarChannels, detail::kCifarSide, options.seed, Split::kTest);
  write_cifar10_file(dir / detail::kCifarTestFile, test, 0, test.size());
}

void write_idx_set(const fs::path& dir, const GenerateOptions& options, bool gzip) {
  require_count("the number of training images", options.train, 1);
  require_count("the number of test images", options.test, 1);
  make_directory(dir);
  const std::string suffix = gzip ? ".gz" : "";
  for (const auto& [split, count] : {std::pair{Split::kTrain, options.train}, std::pair{Split::kTest, options.test}}) {
    const detail::IdxNames names = detail::idx_names(split);
    write_idx_files(dir / (names.images + suffix), dir / (names.labels + suffix),
                    make_image_set(count, 1, detail::kIdxSide, options.seed, split), gzip);
  }
}

}  // namespace gputrain::data
