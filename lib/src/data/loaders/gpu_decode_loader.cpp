#include "loaders/gpu_decode_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "gputrain/common/error.h"
#include "images/gpu_decode_batch.h"
#include "loaders/batch_plan.h"
#include "loaders/prefetch_queue.h"

namespace gputrain::data::detail {

struct GpuDecodeLoader::State {
  // A batch as the workers leave it: its files and draws, and its labels.
  struct Slot {
    EncodedBatch batch;
    torch::Tensor targets;
    std::exception_ptr error;
  };

  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  DecodeImages decode;
  std::vector<std::filesystem::path> files;
  std::vector<ChannelMap> maps;
  ImageShape shape;
  ImageFit fit;

  // Per epoch, written only while no worker runs.
  int64_t epoch = -1;
  std::vector<int64_t> order;
  double wait = 0.0;

  // Last: destroyed first, its workers joined while what they read is still here.
  std::unique_ptr<PrefetchQueue<Slot>> queue;

  State(std::shared_ptr<const Dataset> data, LoaderOptions opts, DecodeImages decoder)
      : dataset(std::move(data)), options(std::move(opts)), decode(std::move(decoder)) {
    GPUTRAIN_CHECK(dataset != nullptr, "GpuDecodeLoader needs a data set");
    const DatasetInfo& info = dataset->info();
    GPUTRAIN_CHECK(info.images && info.input_shape.size() == 3 && info.target_kind != TargetKind::kValues,
                   "data set {} is not images with classes or unlabeled", info.name);
    for (int64_t i = 0; i < info.samples; ++i) {
      const std::filesystem::path* file = dataset->sample_file(i);
      GPUTRAIN_CHECK(file != nullptr, "data set {} sample {} is not read from a file per batch", info.name, i);
      files.push_back(*file);
    }
    maps = checked_channel_maps(options, info);
    shape = {info.input_shape[0], info.input_shape[1], info.input_shape[2]};
    fit = {options.shorter_side, options.center_crop, options.resize};
    queue =
        std::make_unique<PrefetchQueue<Slot>>(options.num_workers, options.prefetch, batch_count(options, info.samples),
                                              [this](int64_t index) { return read(index); });
  }

  void start(int64_t new_epoch, int64_t first_batch) {
    queue->stop();
    epoch = new_epoch;
    order = epoch_order(options, dataset->info().samples, epoch);
    wait = 0.0;
    queue->start(first_batch);
  }

  // The host half of batch `index`: its files, draws and labels (checked, naming the sample).
  Slot read(int64_t index) const {
    Slot slot;
    try {
      slot.batch = read_encoded_batch(options, order, epoch, index, files, options.max_image_pixels);
      if (dataset->info().target_kind == TargetKind::kClasses) {
        const int64_t classes = dataset->info().classes;
        const int64_t* labels = dataset->targets().const_data_ptr<int64_t>();
        slot.targets = torch::empty({static_cast<int64_t>(slot.batch.samples.size())}, torch::kInt64);
        int64_t* to = slot.targets.data_ptr<int64_t>();
        for (const EncodedSample& sample : slot.batch.samples) {
          const int64_t label = labels[sample.row];
          if (label < 0 || label >= classes) throw_bad_label(*dataset, sample.row, label);
          *to++ = label;
        }
      }
    } catch (...) {
      slot.error = std::current_exception();
    }
    return slot;
  }

  // The device half: the batch decoded, fitted, cropped, flipped and normalised where `decode` puts it.
  Batch make(Slot slot) const {
    std::vector<EncodedImage> images;
    images.reserve(slot.batch.samples.size());
    for (EncodedSample& sample : slot.batch.samples) images.push_back(std::move(sample.image));
    const std::vector<torch::Tensor> decoded = decode(images);
    GPUTRAIN_CHECK(decoded.size() == images.size(), "{} images decoded of {}", decoded.size(), images.size());
    std::vector<torch::Tensor> fitted;
    fitted.reserve(decoded.size());
    for (std::size_t i = 0; i < decoded.size(); ++i) {
      slot.batch.samples[i].image.name = std::move(images[i].name);  // for fit_sample's errors
      fitted.push_back(fit_sample(decoded[i], slot.batch.samples[i], fit, shape));
    }
    Batch batch;
    batch.index = slot.batch.index;
    if (options.shard.count > 1) batch.whole_rows = slot.batch.whole;
    batch.inputs = finish_images(fitted, slot.batch, options, maps);
    batch.targets = std::move(slot.targets);
    return batch;
  }
};

GpuDecodeLoader::GpuDecodeLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, torch::Device device)
    : GpuDecodeLoader(dataset, std::move(options),
                      [decoder = std::make_shared<NvjpegDecoder>(device, dataset->info().input_shape.at(0))](
                          const std::vector<EncodedImage>& images) { return decoder->decode(images); }) {}

GpuDecodeLoader::GpuDecodeLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, DecodeImages decode)
    : state_(std::make_unique<State>(std::move(dataset), std::move(options), std::move(decode))) {}

GpuDecodeLoader::~GpuDecodeLoader() = default;

void GpuDecodeLoader::start_epoch(int64_t epoch, int64_t first_batch) { state_->start(epoch, first_batch); }

std::optional<Batch> GpuDecodeLoader::next() {
  State& s = *state_;
  GPUTRAIN_CHECK(s.epoch >= 0, "GpuDecodeLoader::next() called before start_epoch()");
  if (s.queue->done()) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  State::Slot slot = s.queue->next();
  s.wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  try {
    if (slot.error) std::rethrow_exception(slot.error);
    return s.make(std::move(slot));
  } catch (...) {
    s.queue->stop();
    throw;
  }
}

void GpuDecodeLoader::stop() { state_->queue->stop(); }

int64_t GpuDecodeLoader::batches_per_epoch() const { return state_->queue->batches(); }

const DatasetInfo& GpuDecodeLoader::info() const { return state_->dataset->info(); }

double GpuDecodeLoader::wait_seconds() const { return state_->wait; }

}  // namespace gputrain::data::detail
