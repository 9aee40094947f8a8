#include "images/gpu_decode_batch.h"

#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "gputrain/common/error.h"

namespace gputrain::data::detail {

EncodedBatch read_encoded_batch(const LoaderOptions& options, const std::vector<int64_t>& order, int64_t epoch,
                                int64_t index, const std::vector<std::filesystem::path>& files, int64_t max_pixels) {
  const auto samples = static_cast<int64_t>(order.size());
  const int64_t first = index * options.batch_size;
  GPUTRAIN_CHECK(first >= 0 && first < samples, "batch {} of an epoch of {} samples", index, samples);
  EncodedBatch batch;
  batch.index = index;
  batch.whole = std::min(options.batch_size, samples - first);
  const RowRange mine = shard_rows(batch.whole, options.shard);
  // Drawn for the whole batch, whoever reads which rows: a row's draws follow its position.
  const std::vector<Placement> placements = draw_placements(options, options.seed, epoch, index, batch.whole);
  const std::vector<JitterDraw> jitters = draw_color_jitters(options, options.seed, epoch, index, batch.whole);
  for (int64_t position = mine.begin; position < mine.end; ++position) {
    EncodedSample sample;
    sample.row = order.at(static_cast<std::size_t>(first + position));
    const std::filesystem::path& file = files.at(static_cast<std::size_t>(sample.row));
    reading_sample(sample.row, [&] {
      sample.stored = read_image_header(file, max_pixels);
      sample.image = {file.string(), read_image_bytes(file)};
    });
    if (options.resized_crop.size > 0) {
      sample.box =
          draw_crop_box(options, options.seed, epoch, index, position, sample.stored.height, sample.stored.width);
    }
    if (!jitters.empty()) sample.jitter = jitters.at(static_cast<std::size_t>(position));
    sample.placement = placements.at(static_cast<std::size_t>(position));
    if (options.alternating_flip) sample.placement.flip = alternating_flip(options.seed, sample.row, epoch);
    batch.samples.push_back(std::move(sample));
  }
  return batch;
}

torch::Tensor fit_sample(const torch::Tensor& decoded, const EncodedSample& sample, const ImageFit& fit,
                         ImageShape shape) {
  torch::Tensor image = decoded;
  if (sample.box) {
    image = resized_crop(image, *sample.box, shape.height, shape.width);
  } else {
    // As decode_image fits a file (image_files.cpp), from the stored size: data.resize (the shorter
    // side) or data.image_size (the split's size) resizes the whole image, then data.center_crop crops.
    const int64_t height = image.size(1), width = image.size(2);
    const std::array<int64_t, 2> resized = fit.shorter_side > 0 ? shorter_side_size(height, width, fit.shorter_side)
                                           : fit.resize         ? std::array<int64_t, 2>{shape.height, shape.width}
                                                                : std::array<int64_t, 2>{height, width};
    if (fit.shorter_side > 0 || resized != std::array<int64_t, 2>{height, width}) {
      image = resized_crop(image, {0, 0, height, width}, resized[0], resized[1]);
    }
    if (fit.center_crop) image = center_crop(image, shape.height, shape.width);
  }
  if (image.size(1) != shape.height || image.size(2) != shape.width) {
    throw DataError(
        fmt::format("{}: the image is {}x{}, not {}x{} as the data set's; set data.image_size to resize "
                    "them all, or data.center_crop",
                    sample.image.name, image.size(2), image.size(1), shape.width, shape.height));
  }
  if (sample.jitter) image = color_jitter(image, *sample.jitter);
  return image;
}

torch::Tensor finish_images(const std::vector<torch::Tensor>& fitted, const EncodedBatch& batch,
                            const ImagePipeline& images, const std::vector<ChannelMap>& maps) {
  GPUTRAIN_CHECK(!fitted.empty() && fitted.size() == batch.samples.size(), "{} images for {} samples", fitted.size(),
                 batch.samples.size());
  const int64_t pad = images.random_crop;
  std::vector<torch::Tensor> placed;
  placed.reserve(fitted.size());
  for (std::size_t i = 0; i < fitted.size(); ++i) {
    const Placement& at = batch.samples[i].placement;
    torch::Tensor image = fitted[i];
    if (pad > 0) {
      // Output pixel (y, x) reads (y + dy, x + dx), 0 bytes outside: HostLoader's write_image.
      const int64_t height = image.size(1), width = image.size(2);
      image = at::constant_pad_nd(image, {pad, pad, pad, pad}, 0)
                  .narrow(1, at.dy + pad, height)
                  .narrow(2, at.dx + pad, width);
    }
    if (at.flip) image = at::flip(image, {2});
    placed.push_back(image);
  }
  std::vector<float> scales, shifts;
  for (const ChannelMap& m : maps) {
    scales.push_back(m.scale);
    shifts.push_back(m.shift);
  }
  const torch::Device device = fitted.front().device();
  const auto channels = static_cast<int64_t>(maps.size());
  // Two roundings, multiply then add, as ChannelMap says (never fused).
  const torch::Tensor scale = at::tensor(scales).view({1, channels, 1, 1}).to(device);
  const torch::Tensor shift = at::tensor(shifts).view({1, channels, 1, 1}).to(device);
  return at::stack(placed).to(torch::kFloat32).mul_(scale).add_(shift);
}

}  // namespace gputrain::data::detail
