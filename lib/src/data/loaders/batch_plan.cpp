#include "loaders/batch_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "gputrain/common/error.h"
#include "loaders/rng.h"

namespace gputrain::data::detail {

namespace {

// Seed sub-streams: the permutation of an epoch, the augmentation of a batch.
constexpr uint64_t kShuffleStream = 1;
constexpr uint64_t kAugmentStream = 2;
constexpr uint64_t kFlipStream = 3;
constexpr uint64_t kResizedCropStream = 4;
constexpr uint64_t kColorJitterStream = 5;

ConfigError option_error(const std::string& key, const std::string& problem) { return ConfigError({}, key, problem); }

void check_color_jitter(const ColorJitter& jitter) {
  const std::string key = "data.augment.color_jitter.";
  for (const auto& [name, value] : {std::pair{"brightness", jitter.brightness}, std::pair{"contrast", jitter.contrast},
                                    std::pair{"saturation", jitter.saturation}}) {
    if (!(value >= 0)) throw option_error(key + name, fmt::format("must be >= 0 (got {})", value));
  }
  if (!(jitter.hue >= 0 && jitter.hue <= 0.5)) {
    throw option_error(key + "hue", fmt::format("must be in [0, 0.5] (got {})", jitter.hue));
  }
}

void check_resized_crop(const ResizedCrop& crop, const DatasetInfo& info) {
  const std::string key = "data.augment.random_resized_crop";
  if (crop.size < 0) throw option_error(key + ".size", fmt::format("must be >= 0 (got {})", crop.size));
  if (crop.size == 0) return;
  for (const auto& [name, bounds] : {std::pair{"scale", crop.scale}, std::pair{"ratio", crop.ratio}}) {
    if (!(bounds[0] > 0 && bounds[0] <= bounds[1])) {
      throw option_error(key + "." + name,
                         fmt::format("must be [low, high] with 0 < low <= high (got [{}, {}])", bounds[0], bounds[1]));
    }
  }
  // The output replaces the stored image in the batch, and the model (and the test split) see the stored shape.
  const int64_t height = info.input_shape.at(1), width = info.input_shape.at(2);
  if (height != crop.size || width != crop.size) {
    throw option_error(key + ".size",
                       fmt::format("is {0}, but {1} yields {2}x{3} images; the crop is resized to the shape the model "
                                   "sees, so set data.image_size: [{0}] (or the size to {2} when {2} = {3})",
                                   crop.size, info.name, height, width));
  }
}

// The batching's own checks.
void check_batching(const Batching& batching) {
  if (batching.batch_size < 1) {
    throw option_error("data.batch_size", fmt::format("must be >= 1 (got {})", batching.batch_size));
  }
  if (batching.num_workers < 0) {
    throw option_error("data.num_workers", fmt::format("must be >= 0 (got {})", batching.num_workers));
  }
  if (batching.prefetch < 0) {
    throw option_error("data.prefetch", fmt::format("must be >= 0 (got {})", batching.prefetch));
  }
}

// The image pipeline's checks against the data set, and its maps.
std::vector<ChannelMap> checked_pipeline_maps(const ImagePipeline& images, const DatasetInfo& info) {
  if (images.random_crop < 0) {
    throw option_error("data.augment.random_crop", fmt::format("must be >= 0 (got {})", images.random_crop));
  }
  if (images.mean.size() != images.std.size()) {
    throw option_error("data.normalize.std",
                       fmt::format("needs as many values as mean ({} vs {})", images.std.size(), images.mean.size()));
  }
  if (!info.images) {
    if (!images.mean.empty()) {
      throw option_error("data.normalize",
                         fmt::format("applies to image data sets only; {} has feature vectors", info.name));
    }
    if (images.random_crop != 0 || images.hflip || images.resized_crop.size != 0 || images.color_jitter.on()) {
      throw option_error("data.augment",
                         fmt::format("applies to image data sets only; {} has feature vectors", info.name));
    }
    return {};
  }
  const int64_t side = std::min(info.input_shape.at(1), info.input_shape.at(2));
  if (images.reflect && images.random_crop >= side) {
    throw option_error("data.augment.random_crop",
                       fmt::format("mirrors at most {} pixels of the {}x{} images' edge (data.augment.reflect); got {}",
                                   side - 1, info.input_shape.at(1), info.input_shape.at(2), images.random_crop));
  }
  check_resized_crop(images.resized_crop, info);
  check_color_jitter(images.color_jitter);
  const auto channels = static_cast<std::size_t>(info.input_shape.at(0));
  if (!images.mean.empty() && images.mean.size() != 1 && images.mean.size() != channels) {
    throw option_error(
        "data.normalize.mean",
        channels == 1 ? fmt::format("needs 1 value for the 1 channel of {} (got {})", info.name, images.mean.size())
                      : fmt::format("needs 1 or {} values for the {} channels of {} (got {})", channels, channels,
                                    info.name, images.mean.size()));
  }
  for (const double value : images.std) {
    if (!(value > 0)) throw option_error("data.normalize.std", fmt::format("every value must be > 0 (got {})", value));
  }
  return channel_maps(images.mean, images.std, static_cast<int64_t>(channels));
}

}  // namespace

std::vector<ChannelMap> checked_channel_maps(const LoaderOptions& options, const DatasetInfo& info) {
  check_batching(options);
  return checked_pipeline_maps(options, info);
}

std::vector<int64_t> epoch_order(const Batching& batching, int64_t samples, int64_t epoch) {
  std::vector<int64_t> order(static_cast<std::size_t>(samples));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (batching.shuffle) {
    SplitMix64 rng(derive_seed(derive_seed(batching.seed, kShuffleStream), static_cast<uint64_t>(epoch)));
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  return order;
}

std::vector<Placement> draw_placements(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index,
                                       int64_t count) {
  std::vector<Placement> placements(static_cast<std::size_t>(count));
  if (images.random_crop == 0 && !images.hflip) return placements;
  SplitMix64 rng(derive_seed(derive_seed(derive_seed(seed, kAugmentStream), epoch), index));
  const auto pad = static_cast<uint64_t>(images.random_crop);
  for (Placement& at : placements) {
    if (pad > 0) {
      at.dy = static_cast<int64_t>(rng.below(2 * pad + 1) - pad);
      at.dx = static_cast<int64_t>(rng.below(2 * pad + 1) - pad);
    }
    if (images.hflip && !images.alternating_flip) at.flip = (rng.next() & 1) != 0;
  }
  return placements;
}

namespace {

// One draw per sample of batch `index` of `epoch`, each from its own stream
// (seed, `stream`, epoch, batch, position): a sample's draw never depends on
// how many numbers another sample's took.
SplitMix64 sample_stream(uint64_t seed, uint64_t stream, int64_t epoch, int64_t index, int64_t position) {
  return SplitMix64(derive_seed(
      derive_seed(derive_seed(derive_seed(seed, stream), static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index)),
      static_cast<uint64_t>(position)));
}

template <class Draw>
auto per_sample(uint64_t seed, uint64_t stream, int64_t epoch, int64_t index, int64_t count, Draw draw) {
  std::vector<decltype(draw(std::declval<SplitMix64&>()))> draws;
  draws.reserve(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    SplitMix64 rng = sample_stream(seed, stream, epoch, index, i);
    draws.push_back(draw(rng));
  }
  return draws;
}

}  // namespace

std::vector<CropBox> draw_crop_boxes(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index,
                                     int64_t count, int64_t height, int64_t width) {
  if (images.resized_crop.size == 0) return {};
  return per_sample(seed, kResizedCropStream, epoch, index, count,
                    [&](SplitMix64& rng) { return draw_resized_crop(rng, height, width, images.resized_crop); });
}

CropBox draw_crop_box(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index, int64_t position,
                      int64_t height, int64_t width) {
  SplitMix64 rng = sample_stream(seed, kResizedCropStream, epoch, index, position);
  return draw_resized_crop(rng, height, width, images.resized_crop);
}

std::vector<JitterDraw> draw_color_jitters(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index,
                                           int64_t count) {
  if (!images.color_jitter.on()) return {};
  return per_sample(seed, kColorJitterStream, epoch, index, count,
                    [&](SplitMix64& rng) { return draw_color_jitter(rng, images.color_jitter); });
}

torch::Tensor augment_image(torch::Tensor image, const std::vector<CropBox>& boxes,
                            const std::vector<JitterDraw>& jitters, std::size_t i) {
  if (!boxes.empty()) image = resized_crop(image, boxes.at(i), image.size(1), image.size(2));
  if (!jitters.empty()) image = color_jitter(image, jitters.at(i));
  return image;
}

bool alternating_flip(uint64_t seed, int64_t row, int64_t epoch) {
  const bool first =
      (SplitMix64(derive_seed(derive_seed(seed, kFlipStream), static_cast<uint64_t>(row))).next() & 1) != 0;
  return first != (epoch % 2 == 1);
}

void throw_bad_label(const Dataset& dataset, int64_t row, int64_t label) {
  throw DataError(
      fmt::format("{}: label {} is outside 0..{}", dataset.describe_sample(row), label, dataset.info().classes - 1));
}

}  // namespace gputrain::data::detail

namespace gputrain::data {

std::vector<ChannelMap> channel_maps(const std::vector<double>& mean, const std::vector<double>& std,
                                     int64_t channels) {
  std::vector<ChannelMap> maps(static_cast<std::size_t>(channels));
  for (std::size_t c = 0; c < maps.size() && !mean.empty(); ++c) {
    const std::size_t k = mean.size() == 1 ? 0 : c;
    maps[c].scale = static_cast<float>(1.0 / (255.0 * std.at(k)));
    maps[c].shift = static_cast<float>(-mean.at(k) / std.at(k));
  }
  return maps;
}

}  // namespace gputrain::data
