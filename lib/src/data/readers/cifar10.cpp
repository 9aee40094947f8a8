// CIFAR-10, binary version: five training files and one test file of
// 3073-byte records (formats.h). All five training files are required, so a
// partial download fails loudly instead of training on a fraction of the set.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "gputrain/common/error.h"
#include "readers/formats.h"
#include "readers/readers.h"

namespace gputrain::data::detail {
namespace {

namespace fs = std::filesystem;

const std::string kHint =
    "Run `gputrain datasets download cifar10` (into datasets/cifar-10-batches-bin, or --root DIR and set data.root "
    "to DIR), or write a small stand-in with "
    "`gputrain datasets make-cifar --out DIR`; see datasets/README.md.";

std::vector<std::string> split_files(Split split) {
  if (split == Split::kTest) return {kCifarTestFile};
  return {kCifarTrainFiles.begin(), kCifarTrainFiles.end()};
}

// Record count of `file`, from its size.
int64_t count_records(const fs::path& file) {
  std::error_code error;
  const auto bytes = static_cast<int64_t>(fs::file_size(file, error));
  if (error) throw DataError(fmt::format("cifar10: cannot read the size of {}: {}", file.string(), error.message()));
  if (bytes == 0 || bytes % kCifarRecordBytes != 0) {
    throw DataError(fmt::format(
        "cifar10: {} holds {} bytes, not a positive whole number of {}-byte records (1 label byte + {} pixel bytes): "
        "the file is truncated or not CIFAR-10's binary version. {}",
        file.string(), bytes, kCifarRecordBytes, kCifarPixels, kHint));
  }
  return bytes / kCifarRecordBytes;
}

}  // namespace

std::shared_ptr<const Dataset> read_cifar10(const std::string& root, Split split) {
  require_directory("cifar10", root, kHint);
  std::vector<fs::path> files;
  std::vector<std::string> missing;
  for (const std::string& name : split_files(split)) {
    files.push_back(fs::path(root) / name);
    if (!is_data_file("cifar10", files.back())) missing.push_back(name);
  }
  if (!missing.empty()) {
    throw DataError(fmt::format("cifar10: {} lacks {}. {}", root, fmt::join(missing, ", "), kHint));
  }

  std::vector<TensorDataset::Part> parts;
  int64_t total = 0;
  for (const fs::path& file : files) {
    parts.push_back({file.string(), count_records(file)});
    total += parts.back().samples;
  }
  torch::Tensor images = torch::empty({total, kCifarChannels, kCifarSide, kCifarSide}, torch::kUInt8);
  torch::Tensor labels = torch::empty({total}, torch::kInt64);
  uint8_t* pixels = images.data_ptr<uint8_t>();
  int64_t* label = labels.data_ptr<int64_t>();

  std::vector<char> buffer;
  int64_t sample = 0;
  for (const TensorDataset::Part& part : parts) {
    buffer.resize(static_cast<std::size_t>(part.samples * kCifarRecordBytes));
    std::ifstream in(part.file, std::ios::binary);
    if (!in) throw DataError(fmt::format("cifar10: cannot open {}: {}", part.file, std::strerror(errno)));
    if (!in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()))) {
      throw DataError(
          fmt::format("cifar10: cannot read {} ({} of {} bytes read)", part.file, in.gcount(), buffer.size()));
    }
    for (int64_t record = 0; record < part.samples; ++record, ++sample) {
      const auto* bytes = reinterpret_cast<const uint8_t*>(buffer.data()) + record * kCifarRecordBytes;
      if (bytes[0] >= kImageClasses) {
        throw DataError(
            fmt::format("cifar10: {}: record {} (sample {}) has label {}, outside 0..{}; the file is corrupt",
                        part.file, record, sample, bytes[0], kImageClasses - 1));
      }
      label[sample] = bytes[0];
      std::memcpy(pixels + sample * kCifarPixels, bytes + 1, kCifarPixels);
    }
  }

  return std::make_shared<TensorDataset>(image_info("cifar10", root, total, {kCifarChannels, kCifarSide, kCifarSide}),
                                         std::move(images), std::move(labels), std::move(parts));
}

}  // namespace gputrain::data::detail
