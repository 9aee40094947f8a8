#pragma once
// BatchLoader, the interface to batches of one split, whoever makes them:
// HostLoader assembles them on host worker threads, DeviceLoader on the
// training device from a resident copy of the data set. For the same options, seed and epoch both deliver the same
// samples in the same order, augmented the same way.
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gputrain/data/dataset.h"

namespace gputrain::data {

struct Batch {
  torch::Tensor inputs;   // float32: images normalised, [B, C, H, W]; features [B, F]
  torch::Tensor targets;  // int64 [B], float32 [B, T], or undefined when unlabeled
  int64_t index = 0;      // batch number within the epoch
  // Rows of the whole batch this one is a shard of (Batching::shard); 0: it is whole.
  int64_t whole_rows = 0;
  int64_t size() const { return inputs.size(0); }
  // The whole batch's rows, of which this process holds size().
  int64_t global_size() const { return whole_rows > 0 ? whole_rows : size(); }
};

// Which rows of every batch this process makes: under ddp each rank loads,
// decodes and augments only its own, by PyTorch's scatter rule (a chunk of
// ceil(B / count) rows each, the last one shorter, none for a rank the batch
// does not reach). The sample order and each row's augmentation draws are
// those of the whole batch, whoever makes the row.
struct Shard {
  int64_t index = 0;
  int64_t count = 1;
};

// Rows [begin, end) of a batch of `rows` that `shard` makes.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
};
RowRange shard_rows(int64_t rows, const Shard& shard);

// torchvision's RandomResizedCrop(size, scale, ratio) (data.augment.random_resized_crop).
struct ResizedCrop {
  int64_t size = 0;  // output height and width; 0: off
  std::array<double, 2> scale{0.08, 1.0};
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
};

// torchvision's ColorJitter(brightness, contrast, saturation, hue) (data.augment.color_jitter).
struct ColorJitter {
  double brightness = 0.0;  // factor in [max(0, 1 - b), 1 + b]; 0: off
  double contrast = 0.0;
  double saturation = 0.0;
  double hue = 0.0;  // shift in [-h, h] of the colour circle, h <= 0.5
  bool on() const { return brightness > 0 || contrast > 0 || saturation > 0 || hue > 0; }
};

// How a split's samples become batches: their size, order and delivery, and
// which rows of each this process makes. The seed also draws the image
// pipeline's augmentation (the draw_* functions take it beside the pipeline).
struct Batching {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  int64_t num_workers = 0;  // 0: batches are made on the calling thread
  int64_t prefetch = 0;     // batches queued ahead; 0: 2 x num_workers
  bool pin_memory = false;  // page-locked batches (warns once and ignores it without CUDA)
  uint64_t seed = 0;
  Shard shard;  // ddp: this rank's rows of every batch
};

// What is done to each sample's image on its way into a batch: decoded,
// brought to the split's size, augmented and normalised.
struct ImagePipeline {
  // Threads decoding and augmenting images one per task, shared by the workers
  // (data.decode_threads as the plan resolved it); 0: each batch's images on its worker.
  int64_t decode_threads = 0;
  std::vector<double> mean;  // per-channel normalisation (images); empty: none
  std::vector<double> std;
  int64_t random_crop = 0;  // padding in pixels (images, train only); 0: off
  bool reflect = false;     // the padding mirrors the edge instead of being 0 bytes
  bool hflip = false;
  bool alternating_flip = false;  // with hflip: each image mirrored in every other epoch
  ResizedCrop resized_crop;       // before the crop and flip above (images, train only)
  ColorJitter color_jitter;       // after the resized crop (images, train only)
  // Image files read per batch (Dataset::sample_file), brought to the split's
  // size where no resized crop is drawn as image_folder brings them:
  // data.resize's shorter side, then data.center_crop, or data.image_size.
  int64_t max_image_pixels = 0;  // data.max_image_pixels
  int64_t shorter_side = 0;
  bool center_crop = false;
  bool resize = false;
};

// A split's loader: its batching and its image pipeline, one struct of both
// halves so every field keeps its one name; a function needing one half takes that half.
struct LoaderOptions : Batching, ImagePipeline {};

// LoaderOptions from the config for one split in batches of `batch_size` rows
// (the plan resolves them: plan::BatchPlan): augmentation only for training;
// the test split is never shuffled or cut short by drop_last (evaluation sees
// every test sample once, in order).
LoaderOptions loader_options(const config::DataConfig& config, Split split, int64_t batch_size, uint64_t seed);

// Whether the host loader works on `dataset`'s images one at a time: decoding
// files (data.cache: none), or a resized crop or colour jitter per image. Its
// data.decode_threads then do that work.
bool works_per_image(const Dataset& dataset, const ImagePipeline& images);

// Batches in an epoch of `samples`, the last one short unless dropped.
int64_t batch_count(const Batching& batching, int64_t samples);

class BatchLoader {
 public:
  virtual ~BatchLoader() = default;
  // Starts epoch `epoch` (0-based): a new seeded permutation when shuffling.
  // Abandons whatever remained of the previous epoch. `first_batch` > 0 skips
  // that many batches without making them (resuming mid-epoch).
  virtual void start_epoch(int64_t epoch, int64_t first_batch = 0) = 0;
  // The next batch of the epoch, or nullopt at its end. A bad sample is a
  // DataError naming the data set, file and sample.
  virtual std::optional<Batch> next() = 0;
  // Stops mid-epoch (error, signal, early exit) without deadlock.
  virtual void stop() = 0;

  virtual int64_t batches_per_epoch() const = 0;
  virtual const DatasetInfo& info() const = 0;
  // Seconds the caller spent blocked in next() since the epoch started.
  virtual double wait_seconds() const = 0;
};

// Why the split of `split_bytes` cannot be cached on `device` with
// `free_bytes` free: it may take at most half of the free memory, leaving
// the rest to the model, its optimizer and activations. Empty when it fits
// (always off CUDA, where the cache holds the data set's own tensors).
std::string device_cache_blocker(int64_t split_bytes, int64_t free_bytes, const torch::Device& device);

// The bytes a split takes in memory: its inputs (when resident) and targets.
int64_t split_bytes(const Dataset& dataset);

// data.device_cache resolved for `dataset` on `device` with `free_bytes`
// free (-1: unknown, off CUDA): on or off, and why (off for images decoded per
// batch). Throws DataError for `on` with a split that does not fit or is not in memory.
struct DeviceCacheChoice {
  bool on = false;
  std::string why;  // "set", or "auto: ..."
};
DeviceCacheChoice choose_device_cache(config::Switch setting, const Dataset& dataset, int64_t free_bytes,
                                      const torch::Device& device);

// data.device_cache for a run's two splits with `free_bytes` free before
// either is cached: the test split (null for unlabeled data) gets what the
// training split leaves.
struct DeviceCacheChoices {
  DeviceCacheChoice train;
  DeviceCacheChoice test;
};
DeviceCacheChoices choose_device_caches(config::Switch setting, const Dataset& train, const Dataset* test,
                                        int64_t free_bytes, const torch::Device& device);

// data.decode for a split (plan::decide_decode): its image files decoded by
// nvJPEG on the training GPU, or on the host, and why.
struct DecodeChoice {
  bool gpu = false;
  std::string why;  // "set", or "auto: ..."
};
struct DecodeChoices {
  DecodeChoice train;
  DecodeChoice test;
};

// Why this process cannot decode JPEGs with nvJPEG (a build without it, or
// the library not found, saying where it was looked for); empty when it can.
std::string nvjpeg_missing();

// The split's loader as `cache` and `decode` decided (logged): a DeviceLoader
// on `device` (the training device, whatever it is; measured faster on the CPU
// too: configs/README.md), a GpuDecodeLoader on `device` for decode.gpu, else a HostLoader.
std::unique_ptr<BatchLoader> make_batch_loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                                               const DeviceCacheChoice& cache, const DecodeChoice& decode,
                                               torch::Device device);

}  // namespace gputrain::data
