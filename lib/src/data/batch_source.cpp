#include "gputrain/data/batch_source.h"

#include "gputrain/data/batch_stream.h"
#include "gputrain/data/device_cache.h"

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


std::unique_ptr<BatchSource> make_batch_source(std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                                               bool device_cache, torch::Device device) {
  if (device_cache) return std::make_unique<DeviceCache>(std::move(dataset), std::move(options), device);
  return std::make_unique<BatchStream>(std::move(dataset), std::move(options));
}

}  // namespace gputrain::data
