#pragma once
// Small learnable stand-ins for CIFAR-10 and (Fashion-)MNIST, written in the
// real on-disk formats, for tests, demos and benchmarks on machines without
// the real sets (`gputrain datasets make-cifar|make-idx`).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "gputrain/data/dataset.h"

namespace gputrain::data {

// Labelled uint8 images as the formats store them.
struct ImageSet {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;  // [N, C, H, W]
  std::vector<uint8_t> labels;  // [N], 0..9
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// `count` images of channels x side x side over 10 balanced classes. Each
// class has its own template, a 4 x 4 grid of random intensities per channel
// drawn from `seed` alone (so both splits share it); an image is its class's
// template plus uniform noise in [-64, 63] drawn from `seed` and `split`.
ImageSet make_image_set(int64_t count, int64_t channels, int64_t side, uint64_t seed, Split split);

struct GenerateOptions {
  int64_t train = 0;  // training images
  int64_t test = 0;   // test images
  uint64_t seed = 0;
  bool overwrite = false;  // replace the files of an existing set (--force)
};

// The writers below generate and write in pieces, so memory stays small
// whatever the count; each file is written atomically, and a failure removes
// the files already written. Without `overwrite`, a `dir` holding any of the
// set's files is refused (UserError).

// CIFAR-10's layout in `dir` (created if needed): the training images split
// over data_batch_1.bin .. data_batch_5.bin (sizes differ by at most one, so
// train >= 5), the test images in test_batch.bin.
void write_cifar10_set(const std::filesystem::path& dir, const GenerateOptions& options);

// The four 28 x 28 IDX files in `dir`, named as make_dataset looks for them,
// with a .gz suffix when `gzip`.
void write_idx_set(const std::filesystem::path& dir, const GenerateOptions& options, bool gzip);

}  // namespace gputrain::data
