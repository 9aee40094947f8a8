// data.decode: gpu's nvJPEG decoder against the CPU's libjpeg-turbo decode of
// the same files. Without CUDA every case reports "skipped", never "passed".
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "image_files.h"
#include "nvjpeg_decoder.h"
#include "support/temp_dir.h"

namespace gputrain::data::detail {
namespace {

class NvjpegCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  }

  // A photo-like image: smooth colour ramps with mild seeded noise (JPEG's
  // own kind of content), [channels, height, width] uint8.
  static torch::Tensor photo(int64_t channels, int64_t height, int64_t width, uint64_t seed) {
    torch::manual_seed(seed);
    const torch::Tensor y = torch::linspace(0, 1, height).view({1, height, 1});
    const torch::Tensor x = torch::linspace(0, 1, width).view({1, 1, width});
    const torch::Tensor phase = torch::arange(channels, torch::kFloat).view({channels, 1, 1});
    torch::Tensor image =
        128 + 90 * torch::sin(6 * x + 4 * y + 2 * phase) + 8 * torch::randn({channels, height, width});
    return image.clamp(0, 255).to(torch::kUInt8).contiguous();
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

  testing::TempDir dir_{"gputrain-nvjpeg"};
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
    files.push_back(jpeg(photo(3, sizes[i][0], sizes[i][1], i), "rgb" + std::to_string(i) + ".jpg"));
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
  const EncodedImage colour = jpeg(photo(3, 40, 56, 7), "colour.jpg");
  const EncodedImage grey = jpeg(photo(1, 40, 56, 8), "grey.jpg");
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
  const torch::Tensor image = photo(3, 20, 24, 3);
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

}  // namespace
}  // namespace gputrain::data::detail
