// data.decode: gpu's nvJPEG decoder against the CPU's libjpeg-turbo decode of
// the same files. Without CUDA every case reports "skipped", never "passed".
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/data/host_loader.h"
#include "images/gpu_decode_batch.h"
#include "images/image_files.h"
#include "images/nvjpeg_decoder.h"
#include "jpeg_files.h"
#include "loaders/gpu_decode_loader.h"
#include "support/temp_dir.h"

namespace gputrain::data::detail {
namespace {

class NvjpegCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  }

  // The file's bytes as a JPEG of `quality`, written to the temp dir too.
  EncodedImage jpeg(const torch::Tensor& image, const std::string& name, int quality = 90) {
    const ImageShape shape{image.size(0), image.size(1), image.size(2)};
    EncodedImage encoded{(dir_ / name).string(), encode_jpeg(image.const_data_ptr<uint8_t>(), shape, quality)};
    testing::write_text(encoded.name, encoded.bytes);
    return encoded;
  }

  // libjpeg-turbo's decode of `file` at its stored size, as data.decode: cpu reads it.
  static torch::Tensor cpu_decode(const std::string& file, int64_t channels) {
    const ImageShape stored = read_image_header(file, 1 << 24);
    torch::Tensor out = torch::empty({channels, stored.height, stored.width}, torch::kUInt8);
    decode_image(file, {channels, stored.height, stored.width}, ImageFit{}, 1 << 24, out.data_ptr<uint8_t>());
    return out;
  }

  gputrain::testing::TempDir dir_{"gputrain-nvjpeg"};
};

// The two decoders differ by IDCT rounding and by how the 4:2:0 chroma planes
// (libjpeg's default when encode_jpeg writes colour) are upsampled: libjpeg-turbo
// interpolates ("fancy upsampling"), nvJPEG may not. On smooth content that is
// a level or two per pixel; a bound of 24 allows the chroma difference at the
// sharpest colour change of the noise, and a mean below 1 holds the whole image
// to libjpeg's within rounding.
void expect_close(const torch::Tensor& gpu, const torch::Tensor& cpu, const std::string& what) {
  ASSERT_EQ(gpu.device().type(), torch::kCUDA) << what;
  ASSERT_EQ(gpu.scalar_type(), torch::kUInt8) << what;
  ASSERT_EQ(gpu.sizes(), cpu.sizes()) << what;
  const torch::Tensor diff = (gpu.cpu().to(torch::kInt) - cpu.to(torch::kInt)).abs();
  const double mean = diff.to(torch::kDouble).mean().item<double>();
  const int max = diff.max().item<int>();
  std::cout << what << ": mean abs diff " << mean << ", max " << max << "\n";
  EXPECT_LT(mean, 1.0) << what;
  EXPECT_LE(max, 24) << what;
}

TEST_F(NvjpegCuda, BatchDecodesAsLibjpegDoes_CUDA) {
  // Sizes of their own in one batch (odd ones included: the chroma planes round up).
  const std::vector<std::array<int64_t, 2>> sizes{{48, 64}, {37, 53}, {224, 200}, {16, 16}};
  std::vector<EncodedImage> files;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    files.push_back(jpeg(testing::photo(3, sizes[i][0], sizes[i][1], i), "rgb" + std::to_string(i) + ".jpg"));
  }
  NvjpegDecoder decoder(torch::Device(torch::kCUDA, 0), 3);
  // Twice: the second batch reuses the decoder's state (and a smaller batch re-initialises it).
  for (int round = 0; round < 2; ++round) {
    const std::vector<EncodedImage> batch(files.begin(), files.end() - round);
    const std::vector<torch::Tensor> decoded = decoder.decode(batch);
    ASSERT_EQ(decoded.size(), batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i)
      expect_close(decoded[i], cpu_decode(batch[i].name, 3), batch[i].name);
  }
}

// Grey as asked: a colour file's luma (libjpeg's grey output), and a grey file
// repeated in every channel when RGB is asked.
TEST_F(NvjpegCuda, GreyAsTheCpuPathMakesIt_CUDA) {
  const EncodedImage colour = jpeg(testing::photo(3, 40, 56, 7), "colour.jpg");
  const EncodedImage grey = jpeg(testing::photo(1, 40, 56, 8), "grey.jpg");
  NvjpegDecoder to_grey(torch::Device(torch::kCUDA, 0), 1);
  const std::vector<torch::Tensor> luma = to_grey.decode({colour, grey});
  expect_close(luma[0], cpu_decode(colour.name, 1), "colour as grey");
  expect_close(luma[1], cpu_decode(grey.name, 1), "grey as grey");
  NvjpegDecoder to_rgb(torch::Device(torch::kCUDA, 0), 3);
  const torch::Tensor rgb = to_rgb.decode({grey})[0];
  expect_close(rgb, cpu_decode(grey.name, 3), "grey as RGB");
  EXPECT_TRUE(torch::equal(rgb[0], rgb[1]) && torch::equal(rgb[1], rgb[2]));
}

// A file that is no JPEG (a PNG here) is a DataError naming it, whichever
// place of the batch it holds.
TEST_F(NvjpegCuda, NotAJpegIsADataErrorNamingTheFile_CUDA) {
  const torch::Tensor image = testing::photo(3, 20, 24, 3);
  const EncodedImage good = jpeg(image, "good.jpg");
  const EncodedImage png{(dir_ / "picture.png").string(), encode_png(image.const_data_ptr<uint8_t>(), {3, 20, 24})};
  NvjpegDecoder decoder(torch::Device(torch::kCUDA, 0), 3);
  try {
    decoder.decode({good, png});
    FAIL() << "a PNG decoded as a JPEG";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("picture.png"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data.decode: cpu"), std::string::npos) << e.what();
  }
  // The decoder still works after the refusal.
  expect_close(decoder.decode({good})[0], cpu_decode(good.name, 3), "after a refusal");
}

// data.decode: gpu's batch made on the GPU (the host half, nvJPEG, then the
// device half's ops on CUDA tensors) against HostLoader's for the same seed,
// in levels of 0-255 (no data.normalize: the floats are bytes / 255). The
// decode differences above, smoothed by the bilinear resize, plus a level of
// float rounding between the devices' blends; colour jitter without hue (its
// HSV round trip turns a level into several near grey).
TEST_F(NvjpegCuda, BatchesMatchHostLoaders_CUDA) {
  const std::vector<std::filesystem::path> files = testing::write_jpegs(dir_.path(), 6, {{24, 24}});
  const auto dataset = std::make_shared<testing::JpegFiles>(files, ImageShape{3, 24, 24});
  LoaderOptions options = testing::augmented_options(4);
  options.mean.clear();
  options.std.clear();
  options.color_jitter.hue = 0;
  NvjpegDecoder decoder(torch::Device(torch::kCUDA, 0), 3);
  testing::against_host_loader(
      dataset, options, files, 2, 2, [&](const std::vector<EncodedImage>& images) { return decoder.decode(images); },
      [](const std::string& what, const torch::Tensor& inputs, const Batch& expected) {
        ASSERT_EQ(inputs.device().type(), torch::kCUDA);
        const torch::Tensor levels = (inputs.cpu() * 255).round().to(torch::kUInt8);
        expect_close(levels.cuda(), (expected.inputs * 255).round().to(torch::kUInt8), what);
      });
}

// data.decode: gpu's loader (worker threads, nvJPEG, the device half on the
// current stream) over two epochs of files of their own sizes, against the
// same loader decoding with libjpeg-turbo on the CPU: the same rows, labels
// and draws, pixels within the decoders' difference above.
TEST_F(NvjpegCuda, LoaderMakesTheCpuHalvesBatchesOnTheGpu_CUDA) {
  const std::vector<std::filesystem::path> files = testing::write_jpegs(dir_.path(), 7, {{40, 56}, {24, 24}, {33, 29}});
  const auto dataset = std::make_shared<testing::JpegFiles>(files, ImageShape{3, 24, 24});
  LoaderOptions options = testing::augmented_options(3);
  options.mean.clear();
  options.std.clear();
  options.color_jitter.hue = 0;
  options.num_workers = 2;
  options.max_image_pixels = testing::kJpegMaxPixels;
  GpuDecodeLoader gpu(dataset, options, torch::Device(torch::kCUDA, 0));
  GpuDecodeLoader cpu(dataset, options, testing::cpu_decode_all);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    gpu.start_epoch(epoch);
    cpu.start_epoch(epoch);
    for (int64_t index = 0; index < 3; ++index) {
      const std::optional<Batch> got = gpu.next();
      const std::optional<Batch> expected = cpu.next();
      ASSERT_TRUE(got && expected);
      ASSERT_EQ(got->inputs.device().type(), torch::kCUDA);
      EXPECT_TRUE(torch::equal(got->targets, expected->targets));
      const std::string what = "loader epoch " + std::to_string(epoch) + " batch " + std::to_string(index);
      const torch::Tensor levels = (got->inputs.cpu() * 255).round().to(torch::kUInt8);
      expect_close(levels.cuda(), (expected->inputs * 255).round().to(torch::kUInt8), what);
    }
    EXPECT_FALSE(gpu.next().has_value());
  }
}

}  // namespace
}  // namespace gputrain::data::detail
