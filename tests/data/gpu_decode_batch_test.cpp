// data.decode: gpu's batch halves on the CPU: the host half reads what
// HostLoader would decode and draws what it would draw; the device half's
// ops, run here on CPU tensors with libjpeg-turbo standing in for nvJPEG,
// make HostLoader's batches to the bit.
#include "images/gpu_decode_batch.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/data/host_loader.h"
#include "jpeg_files.h"
#include "support/temp_dir.h"

namespace gputrain::data::detail {
namespace {

namespace fs = std::filesystem;

using testing::augmented_options;
using testing::cpu_decode_all;
using testing::JpegFiles;
constexpr int64_t kMaxPixels = testing::kJpegMaxPixels;

class GpuDecodeBatch : public ::testing::Test {
 protected:
  std::vector<fs::path> write_jpegs(int64_t count, const std::vector<std::array<int64_t, 2>>& sizes) {
    return testing::write_jpegs(dir_.path(), count, sizes);
  }
  testing::TempDir dir_{"gputrain-gpu-decode"};
};

// Every batch of two epochs (with and without alternating_flip), by the two
// halves, equals HostLoader's over whole decodes (each box drawn on the
// file's stored size, then detail::resized_crop, as the GPU path computes):
// the same rows in the same order, the same boxes, jitter, crops and flips,
// the same floats. (image_folder's own box decode is compared below.)
TEST_F(GpuDecodeBatch, MakesHostLoadersBatches) {
  const std::vector<fs::path> files = write_jpegs(6, {{24, 24}, {40, 56}, {33, 29}});
  const auto dataset = std::make_shared<JpegFiles>(files, ImageShape{3, 24, 24});
  for (const bool alternating : {false, true}) {
    LoaderOptions options = augmented_options(4);
    options.alternating_flip = alternating;
    // 4 rows, then the short 2
    testing::against_host_loader(dataset, options, files, 2, 2, cpu_decode_all,
                                 [](const std::string& what, const torch::Tensor& inputs, const Batch& expected) {
                                   EXPECT_TRUE(torch::equal(inputs, expected.inputs)) << what;
                                 });
  }
}

// image_folder under data.cache: none decodes only each box (iMCU columns
// cropped, DCT-scaled where the box is at least twice the output), the
// halves (as nvJPEG) the whole file: they differ by the chroma upsampling at
// the crop's edges and the scalings' rounding. Measured in 0-255 levels on
// these files: mean 1.96-2.91, max 22 per batch; the bounds leave room for
// that and fail when a draw, flip or crop is another position's.
TEST_F(GpuDecodeBatch, LargerFilesCloseToHostLoadersScaledDecode) {
  const std::vector<fs::path> files = write_jpegs(6, {{96, 96}, {80, 112}});
  const auto dataset = std::make_shared<JpegFiles>(files, ImageShape{3, 24, 24});
  dataset->as_image_folder = true;
  LoaderOptions options = augmented_options(3);
  options.mean.clear();  // the floats are bytes / 255
  options.std.clear();
  options.resized_crop.scale = {0.5, 1.0};  // boxes of at least 48 pixels a side: DCT-scaled
  testing::against_host_loader(dataset, options, files, 2, 2, cpu_decode_all,
                               [](const std::string& what, const torch::Tensor& inputs, const Batch& expected) {
                                 const torch::Tensor diff = ((inputs - expected.inputs) * 255).abs();
                                 const double mean = diff.mean().item<double>(), max = diff.max().item<double>();
                                 std::cout << what << ": mean " << mean << ", max " << max << "\n";
                                 EXPECT_LT(mean, 4.0) << what;
                                 EXPECT_LE(max, 32.0) << what;
                               });
}

// Files of their own sizes: each box drawn on its file's stored size from its
// position's stream, the bytes the file's; under ddp a rank reads only its
// rows, with the draws of their positions in the whole batch.
TEST_F(GpuDecodeBatch, BoxesOnStoredSizesAndShardRows) {
  const std::vector<fs::path> files = write_jpegs(7, {{30, 40}, {64, 20}, {17, 33}});
  LoaderOptions options = augmented_options(5);
  const std::vector<int64_t> order = epoch_order(options, 7, 1);
  const EncodedBatch whole = read_encoded_batch(options, order, 1, 0, files, kMaxPixels);
  ASSERT_EQ(whole.samples.size(), 5u);
  EXPECT_EQ(whole.whole, 5);
  for (std::size_t i = 0; i < whole.samples.size(); ++i) {
    const EncodedSample& s = whole.samples[i];
    EXPECT_EQ(s.row, order[i]);
    EXPECT_EQ(s.image.bytes, testing::read_text(files[static_cast<std::size_t>(s.row)]));
    const ImageShape stored = read_image_header(files[static_cast<std::size_t>(s.row)], kMaxPixels);
    EXPECT_EQ(s.stored.height, stored.height);
    EXPECT_EQ(s.stored.width, stored.width);
    ASSERT_TRUE(s.box.has_value());
    const CropBox box =
        draw_crop_box(options, options.seed, 1, 0, static_cast<int64_t>(i), stored.height, stored.width);
    EXPECT_EQ(std::tie(s.box->top, s.box->left, s.box->height, s.box->width),
              std::tie(box.top, box.left, box.height, box.width));
    EXPECT_LE(s.box->top + s.box->height, stored.height);
    EXPECT_LE(s.box->left + s.box->width, stored.width);
  }
  options.shard = {1, 2};  // rows [3, 5) of the batch of 5
  const EncodedBatch second = read_encoded_batch(options, order, 1, 0, files, kMaxPixels);
  ASSERT_EQ(second.samples.size(), 2u);
  EXPECT_EQ(second.whole, 5);
  for (std::size_t i = 0; i < 2; ++i) {
    const EncodedSample& mine = second.samples[i];
    const EncodedSample& same = whole.samples[3 + i];
    EXPECT_EQ(mine.row, same.row);
    EXPECT_EQ(std::tie(mine.box->top, mine.box->left, mine.placement.dy, mine.placement.dx, mine.placement.flip),
              std::tie(same.box->top, same.box->left, same.placement.dy, same.placement.dx, same.placement.flip));
  }
  // The last batch is short: 2 rows.
  EXPECT_EQ(read_encoded_batch(augmented_options(5), order, 1, 1, files, kMaxPixels).samples.size(), 2u);
}

// The test split: data.resize then data.center_crop (or data.image_size) on the
// decoded image, as image_folder fits a file (a PNG: lossless, so both start from the same pixels).
TEST_F(GpuDecodeBatch, FitsTheTestSplitAsImageFolderDoes) {
  torch::manual_seed(5);
  const torch::Tensor pixels = torch::randint(0, 256, {3, 37, 50}, torch::kUInt8);
  const fs::path png =
      testing::write_text(dir_ / "test.png", encode_png(pixels.const_data_ptr<uint8_t>(), {3, 37, 50}));
  ImageFit fit;
  fit.shorter_side = 30;
  fit.center_crop = true;
  torch::Tensor expected = torch::empty({3, 28, 28}, torch::kUInt8);
  decode_image(png, {3, 28, 28}, fit, kMaxPixels, expected.data_ptr<uint8_t>());
  EncodedSample sample;
  sample.image.name = png.string();
  EXPECT_TRUE(torch::equal(fit_sample(pixels, sample, fit, {3, 28, 28}), expected));
  ImageFit image_size;  // data.image_size alone: the whole image resized to the split's size
  image_size.resize = true;
  torch::Tensor resized = torch::empty({3, 20, 26}, torch::kUInt8);
  decode_image(png, {3, 20, 26}, image_size, kMaxPixels, resized.data_ptr<uint8_t>());
  EXPECT_TRUE(torch::equal(fit_sample(pixels, sample, image_size, {3, 20, 26}), resized));
  // Another size than the split's after the fit is the file's error.
  try {
    fit_sample(pixels, sample, ImageFit{}, {3, 28, 28});
    FAIL() << "a 50x37 image taken for 28x28";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("test.png: the image is 50x37, not 28x28"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gputrain::data::detail
