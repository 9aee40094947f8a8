#include "gputrain/data/batch_loader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/data/device_loader.h"
#include "gputrain/data/host_loader.h"
#include "images/nvjpeg_library.h"
#include "loaders/gpu_decode_loader.h"
#include "readers/readers.h"

namespace gputrain::data {

namespace {

// Evaluation sees every test sample once, in file order.
Batching make_batching(const config::DataConfig& config, Split split, int64_t batch_size, uint64_t seed) {
  const bool train = split == Split::kTrain;
  Batching batching;
  batching.batch_size = batch_size;
  batching.shuffle = train && config.shuffle;
  batching.drop_last = train && config.drop_last;
  batching.num_workers = config.num_workers;
  batching.prefetch = config.prefetch;
  batching.pin_memory = config.pin_memory;
  batching.seed = seed;
  return batching;
}

// Evaluation sees its images unaugmented.
ImagePipeline make_image_pipeline(const config::DataConfig& config, Split split) {
  ImagePipeline images;
  images.decode_threads = config.decode_threads;
  images.mean = config.normalize.mean;
  images.std = config.normalize.std;
  images.max_image_pixels = config.max_image_pixels;
  const detail::ImageFit fit = detail::image_fit(config, split);
  images.shorter_side = fit.shorter_side;
  images.center_crop = fit.center_crop;
  images.resize = fit.resize;
  if (split == Split::kTrain) {
    images.random_crop = config.augment.random_crop;
    images.reflect = config.augment.reflect;
    images.hflip = config.augment.hflip;
    images.alternating_flip = config.augment.alternating_flip;
    const config::ResizedCropConfig& crop = config.augment.random_resized_crop;
    images.resized_crop.size = crop.size;
    if (crop.scale.size() == 2) images.resized_crop.scale = {crop.scale[0], crop.scale[1]};
    if (crop.ratio.size() == 2) images.resized_crop.ratio = {crop.ratio[0], crop.ratio[1]};
    const config::ColorJitterConfig& jitter = config.augment.color_jitter;
    images.color_jitter = {jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue};
  }
  return images;
}

}  // namespace

LoaderOptions loader_options(const config::DataConfig& config, Split split, int64_t batch_size, uint64_t seed) {
  return {make_batching(config, split, batch_size, seed), make_image_pipeline(config, split)};
}

RowRange shard_rows(int64_t rows, const Shard& shard) {
  GPUTRAIN_CHECK(shard.count >= 1 && shard.index >= 0 && shard.index < shard.count, "shard {} of {}", shard.index,
                 shard.count);
  const int64_t chunk = (rows + shard.count - 1) / shard.count;
  return {std::min(rows, shard.index * chunk), std::min(rows, (shard.index + 1) * chunk)};
}

bool works_per_image(const Dataset& dataset, const ImagePipeline& images) {
  return dataset.info().images && (!dataset.resident() || images.resized_crop.size > 0 || images.color_jitter.on());
}

int64_t batch_count(const Batching& batching, int64_t samples) {
  return batching.drop_last ? samples / batching.batch_size : (samples + batching.batch_size - 1) / batching.batch_size;
}

namespace {
double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }
}  // namespace

int64_t split_bytes(const Dataset& dataset) {
  const int64_t targets = dataset.targets().defined() ? static_cast<int64_t>(dataset.targets().nbytes()) : 0;
  return (dataset.resident() ? static_cast<int64_t>(dataset.inputs().nbytes()) : 0) + targets;
}

std::string device_cache_blocker(int64_t split_bytes, int64_t free_bytes, const torch::Device& device) {
  if (!device.is_cuda() || free_bytes < 0 || split_bytes <= free_bytes / 2) return "";
  return fmt::format("the split needs {:.2f} GiB on {}, more than half of its {:.2f} GiB free", gib(split_bytes),
                     device.str(), gib(free_bytes));
}

DeviceCacheChoice choose_device_cache(config::Switch setting, const Dataset& dataset, int64_t free_bytes,
                                      const torch::Device& device) {
  if (setting == config::Switch::kOff) return {false, "set"};
  const std::string& split = dataset.info().name;
  if (!dataset.resident()) {
    if (setting == config::Switch::kOn) {
      throw DataError(
          fmt::format("data.device_cache: true needs {}'s images in memory, but data.cache is none; set "
                      "data.cache: memory, or data.device_cache: auto",
                      split));
    }
    return {false, "auto: data.cache is none, so the images are decoded per batch"};
  }
  const int64_t split_bytes = data::split_bytes(dataset);
  const std::string blocker = device_cache_blocker(split_bytes, free_bytes, device);
  if (setting == config::Switch::kOn) {
    if (!blocker.empty()) {
      throw DataError(
          fmt::format("data.device_cache: {} ({}); set data.device_cache: auto to fall back to the host "
                      "loader, or off",
                      blocker, split));
    }
    return {true, "set"};
  }
  if (!blocker.empty()) return {false, "auto: " + blocker};
  if (device.is_cuda())
    return {true, fmt::format("auto: the split's {:.2f} GiB fits on {}", gib(split_bytes), device.str())};
  return {true, fmt::format("auto: the split is in {}'s memory already; batched tensor ops make the batches faster "
                            "than per-sample loader threads",
                            device.str())};
}

DeviceCacheChoices choose_device_caches(config::Switch setting, const Dataset& train, const Dataset* test,
                                        int64_t free_bytes, const torch::Device& device) {
  DeviceCacheChoices choices;
  choices.train = choose_device_cache(setting, train, free_bytes, device);
  if (test == nullptr) return choices;
  if (choices.train.on && free_bytes >= 0) free_bytes -= split_bytes(train);
  choices.test = choose_device_cache(setting, *test, free_bytes, device);
  return choices;
}

std::string nvjpeg_missing() {
  if (!detail::nvjpeg_built()) return "this build has none (LibTorch without CUDA, or compiled without nvjpeg.h)";
  return detail::nvjpeg_library().why_not;
}

std::unique_ptr<BatchLoader> make_batch_loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                                               const DeviceCacheChoice& cache, const DecodeChoice& decode,
                                               torch::Device device) {
  // Once per split (training and test): the sample count says which.
  const std::string samples = count_of(dataset->info().samples, "sample");
  spdlog::info("data.device_cache: {} for {} ({})", cache.on ? "on" : "off", samples, cache.why);
  // Said where files are decoded per batch, the only place it applies.
  if (dataset->info().samples > 0 && dataset->sample_file(0) != nullptr) {
    spdlog::info("data.decode: {} for {} ({})", decode.gpu ? "gpu" : "cpu", samples, decode.why);
  }
  if (decode.gpu) return std::make_unique<detail::GpuDecodeLoader>(std::move(dataset), std::move(options), device);
  if (!cache.on) return std::make_unique<HostLoader>(std::move(dataset), std::move(options));
  return std::make_unique<DeviceLoader>(std::move(dataset), std::move(options), device);
}

}  // namespace gputrain::data
