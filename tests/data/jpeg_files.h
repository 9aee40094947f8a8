#pragma once
// JPEG files for data.decode: gpu's tests: written seeded, and a data set that
// reads them per batch (whole files, or as image_folder does under
// data.cache: none), for HostLoader to make the reference batches.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "gputrain/data/dataset.h"
#include "gputrain/data/host_loader.h"
#include "images/gpu_decode_batch.h"
#include "images/image_files.h"
#include "images/image_ops.h"
#include "loaders/gpu_decode_loader.h"
#include "support/temp_dir.h"

namespace gputrain::testing {

inline constexpr int64_t kJpegMaxPixels = 1 << 20;

// A photo-like image: smooth colour ramps with mild seeded noise (JPEG's own
// kind of content, on which decoders differ by rounding only), [channels,
// height, width] uint8.
inline torch::Tensor photo(int64_t channels, int64_t height, int64_t width, uint64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor y = torch::linspace(0, 1, height).view({1, height, 1});
  const torch::Tensor x = torch::linspace(0, 1, width).view({1, 1, width});
  const torch::Tensor phase = torch::arange(channels, torch::kFloat).view({channels, 1, 1});
  const torch::Tensor image =
      128 + 90 * torch::sin(6 * x + 4 * y + 2 * phase) + 8 * torch::randn({channels, height, width});
  return image.clamp(0, 255).to(torch::kUInt8).contiguous();
}

// `count` photo() JPEGs in `dir`, of `sizes` (cycled), named in row order.
inline std::vector<std::filesystem::path> write_jpegs(const std::filesystem::path& dir, int64_t count,
                                                      const std::vector<std::array<int64_t, 2>>& sizes) {
  std::vector<std::filesystem::path> files;
  for (int64_t i = 0; i < count; ++i) {
    const auto& size = sizes[static_cast<std::size_t>(i) % sizes.size()];
    const torch::Tensor pixels = photo(3, size[0], size[1], static_cast<uint64_t>(i));
    files.push_back(write_text(dir / fmt::format("{:03}.jpg", i),
                               data::detail::encode_jpeg(pixels.const_data_ptr<uint8_t>(), {3, size[0], size[1]}, 90)));
  }
  return files;
}

// `files`, all of `shape`, decoded per batch by libjpeg-turbo; labels alternate 0, 1.
class JpegFiles final : public data::Dataset {
 public:
  JpegFiles(std::vector<std::filesystem::path> files, data::detail::ImageShape shape)
      : files_(std::move(files)), shape_(shape) {
    info_.name = "jpeg-files";
    info_.samples = static_cast<int64_t>(files_.size());
    info_.input_shape = {shape.channels, shape.height, shape.width};
    info_.classes = 2;
    info_.images = true;
    targets_ = torch::arange(info_.samples, torch::kInt64).remainder(2);
  }
  const data::DatasetInfo& info() const override { return info_; }
  const torch::Tensor& inputs() const override { return inputs_; }
  const torch::Tensor& targets() const override { return targets_; }
  bool resident() const override { return false; }
  // The resized crop's box drawn on the file's stored size. By default the
  // whole file decoded, then detail::resized_crop (what data.decode: gpu
  // computes); as_image_folder: image_folder's decode of only the box, at
  // libjpeg's DCT scaling where the box is at least twice the output.
  void read_resized_crop(int64_t index, const data::DrawCropBox& draw_box, uint8_t* out) const override {
    const std::filesystem::path& file = files_.at(static_cast<std::size_t>(index));
    if (as_image_folder) {
      data::detail::decode_resized_crop(file, shape_, draw_box, kJpegMaxPixels, out);
      return;
    }
    const data::detail::ImageShape stored = data::detail::read_image_header(file, kJpegMaxPixels);
    torch::Tensor whole = torch::empty({shape_.channels, stored.height, stored.width}, torch::kUInt8);
    data::detail::decode_image(file, {shape_.channels, stored.height, stored.width}, data::detail::ImageFit{},
                               kJpegMaxPixels, whole.data_ptr<uint8_t>());
    const torch::Tensor cropped =
        data::detail::resized_crop(whole, draw_box(stored.height, stored.width), shape_.height, shape_.width)
            .contiguous();
    std::memcpy(out, cropped.const_data_ptr<uint8_t>(), static_cast<std::size_t>(cropped.numel()));
  }
  const std::filesystem::path* sample_file(int64_t index) const override {
    return &files_.at(static_cast<std::size_t>(index));
  }
  void read_image(int64_t index, uint8_t* out) const override {
    data::detail::decode_image(files_.at(static_cast<std::size_t>(index)), shape_, data::detail::ImageFit{},
                               kJpegMaxPixels, out);
  }

 private:
  std::vector<std::filesystem::path> files_;
  data::detail::ImageShape shape_;
  data::DatasetInfo info_;

 public:
  bool as_image_folder = false;

 private:
  torch::Tensor inputs_, targets_;
};

// libjpeg-turbo's decode of each file at its stored size: nvJPEG's stand-in on the CPU.
inline std::vector<torch::Tensor> cpu_decode_all(const std::vector<data::detail::EncodedImage>& images) {
  std::vector<torch::Tensor> decoded;
  for (const data::detail::EncodedImage& image : images) {
    const data::detail::ImageShape stored = data::detail::read_image_header(image.name, kJpegMaxPixels);
    torch::Tensor out = torch::empty({3, stored.height, stored.width}, torch::kUInt8);
    data::detail::decode_image(image.name, {3, stored.height, stored.width}, data::detail::ImageFit{}, kJpegMaxPixels,
                               out.data_ptr<uint8_t>());
    decoded.push_back(out);
  }
  return decoded;
}

// Batch `index` of `epoch` (in `order`) made by the two halves, `decode`
// standing in for nvJPEG, the files brought to 24x24 RGB where no box is drawn
// (data.image_size's fit).
inline torch::Tensor halves_batch(const data::LoaderOptions& options, const std::vector<int64_t>& order, int64_t epoch,
                                  int64_t index, const std::vector<std::filesystem::path>& files,
                                  const data::detail::DecodeImages& decode) {
  using namespace data::detail;
  const EncodedBatch batch = read_encoded_batch(options, order, epoch, index, files, kJpegMaxPixels);
  std::vector<EncodedImage> images;
  for (const EncodedSample& sample : batch.samples) images.push_back(sample.image);
  const std::vector<torch::Tensor> decoded = decode(images);
  ImageFit image_size;
  image_size.resize = true;
  std::vector<torch::Tensor> fitted;
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    fitted.push_back(fit_sample(decoded[i], batch.samples[i], image_size, {3, 24, 24}));
  }
  data::DatasetInfo info;
  info.input_shape = {3, 24, 24};
  info.images = true;
  return finish_images(fitted, batch, options, checked_channel_maps(options, info));
}

// `epochs` x `batches` batches of `dataset`'s `files`: `check(what, halves,
// host)` gets the halves' inputs (`decode` standing in for nvJPEG) and
// HostLoader's batch for the same epoch and index.
template <typename Check>
void against_host_loader(const std::shared_ptr<const data::Dataset>& dataset, const data::LoaderOptions& options,
                         const std::vector<std::filesystem::path>& files, int64_t epochs, int64_t batches,
                         const data::detail::DecodeImages& decode, Check check) {
  data::HostLoader host(dataset, options);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    host.start_epoch(epoch);
    const std::vector<int64_t> order = data::detail::epoch_order(options, dataset->info().samples, epoch);
    for (int64_t index = 0; index < batches; ++index) {
      const std::optional<data::Batch> expected = host.next();
      ASSERT_TRUE(expected.has_value());
      check(fmt::format("epoch {} batch {}", epoch, index), halves_batch(options, order, epoch, index, files, decode),
            *expected);
    }
  }
}

// Options with every augmentation data.decode: gpu makes on the device.
inline data::LoaderOptions augmented_options(int64_t batch_size) {
  data::LoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = true;
  options.seed = 29;
  options.mean = {0.5, 0.4, 0.3};
  options.std = {0.2, 0.25, 0.3};
  options.hflip = true;
  options.random_crop = 2;
  options.resized_crop.size = 24;
  options.color_jitter = {0.4, 0.4, 0.4, 0.1};
  return options;
}

}  // namespace gputrain::testing
