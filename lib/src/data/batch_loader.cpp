#include "gputrain/data/batch_loader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gputrain/common/error.h"
#include "gputrain/data/device_loader.h"
#include "gputrain/data/host_loader.h"
#include "gputrain/device/memory.h"

namespace gputrain::data {

LoaderOptions loader_options(const config::DataConfig& config, Split split, uint64_t seed) {
  const bool train = split == Split::kTrain;
  LoaderOptions options;
  options.batch_size = !train && config.test_batch_size > 0 ? config.test_batch_size : config.batch_size;
  // Evaluation sees every test sample once, in file order, unaugmented.
  options.shuffle = train && config.shuffle;
  options.drop_last = train && config.drop_last;
  options.num_workers = config.num_workers;
  options.prefetch = config.prefetch;
  options.pin_memory = config.pin_memory;
  options.seed = seed;
  options.mean = config.normalize.mean;
  options.std = config.normalize.std;
  if (train) {
    options.random_crop = config.augment.random_crop;
    options.hflip = config.augment.hflip;
  }
  return options;
}

namespace {
double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

int64_t split_bytes(const Dataset& dataset) {
  const int64_t targets = dataset.targets().defined() ? static_cast<int64_t>(dataset.targets().nbytes()) : 0;
  return static_cast<int64_t>(dataset.inputs().nbytes()) + targets;
}
}  // namespace

std::string device_cache_blocker(int64_t split_bytes, int64_t free_bytes, const torch::Device& device) {
  if (!device.is_cuda() || free_bytes < 0 || split_bytes <= free_bytes / 2) return "";
  return fmt::format("the split needs {:.2f} GiB on {}, more than half of its {:.2f} GiB free", gib(split_bytes),
                     device.str(), gib(free_bytes));
}

std::unique_ptr<BatchLoader> make_batch_loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                                               config::Switch device_cache, torch::Device device) {
  if (device_cache == config::Switch::kOff) {
    return std::make_unique<HostLoader>(std::move(dataset), std::move(options));
  }
  const int64_t bytes = split_bytes(*dataset);
  const std::string blocker = device_cache_blocker(bytes, device::free_memory(device), device);
  const std::string split = dataset->info().name;
  if (device_cache == config::Switch::kOn) {
    if (!blocker.empty()) {
      throw DataError(
          fmt::format("data.device_cache: {} ({}); set data.device_cache: auto to fall back to the host "
                      "loader, or off",
                      blocker, split));
    }
    return std::make_unique<DeviceLoader>(std::move(dataset), std::move(options), device);
  }
  if (!device.is_cuda()) {
    spdlog::info("data.device_cache: off (auto: the host loader's threads overlap with training on {})", device.str());
    return std::make_unique<HostLoader>(std::move(dataset), std::move(options));
  }
  if (!blocker.empty()) {
    spdlog::info("data.device_cache: off (auto: {})", blocker);
    return std::make_unique<HostLoader>(std::move(dataset), std::move(options));
  }
  spdlog::info("data.device_cache: on (auto: the split's {:.2f} GiB fits on {})", gib(bytes), device.str());
  return std::make_unique<DeviceLoader>(std::move(dataset), std::move(options), device);
}

}  // namespace gputrain::data
