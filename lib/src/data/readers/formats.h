#pragma once
// File names and byte layouts of the formats on disk, shared by the readers
// and the generator so the two cannot drift apart (datasets/README.md).
#include <array>
#include <cstdint>

#include "gputrain/data/dataset.h"

namespace gputrain::data::detail {

// CIFAR-10 binary version: records of 1 label byte then 3 x 32 x 32 pixel
// bytes, channel-major (all red, then green, then blue), rows top to bottom.
constexpr int64_t kCifarChannels = 3;
constexpr int64_t kCifarSide = 32;
constexpr int64_t kCifarPixels = kCifarChannels * kCifarSide * kCifarSide;
constexpr int64_t kCifarRecordBytes = 1 + kCifarPixels;
constexpr std::array<const char*, 5> kCifarTrainFiles{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                                      "data_batch_4.bin", "data_batch_5.bin"};
constexpr const char* kCifarTestFile = "test_batch.bin";

// IDX (MNIST, Fashion-MNIST): a big-endian magic number 0x000008TD (T = 0x08:
// unsigned bytes, D = number of dimensions), D big-endian uint32 sizes, then
// the bytes. Files may be gzip-compressed with a ".gz" suffix.
constexpr uint32_t kIdxImagesMagic = 0x00000803;
constexpr uint32_t kIdxLabelsMagic = 0x00000801;
constexpr int64_t kIdxSide = 28;

struct IdxNames {
  const char* images;
  const char* labels;
};
inline IdxNames idx_names(Split split) {
  if (split == Split::kTrain) return {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
  return {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
}

constexpr int64_t kImageClasses = 10;  // CIFAR-10, MNIST and Fashion-MNIST alike

}  // namespace gputrain::data::detail
