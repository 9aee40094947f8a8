#include "gpu_decode_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "batch_plan.h"
#include "gpu_decode_batch.h"
#include "gputrain/common/error.h"
#include "gputrain/device/host_resources.h"

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
  int64_t prefetch = 0;
  int64_t batches = 0;

  // Per epoch, written only while no worker runs.
  int64_t epoch = -1;
  std::vector<int64_t> order;
  double wait = 0.0;

  // Shared with the workers, under `mutex`.
  std::mutex mutex;
  std::condition_variable work_cv;   // a batch may be claimed, or stop
  std::condition_variable ready_cv;  // a batch is ready
  int64_t claimed = 0;
  int64_t delivered = 0;
  bool stopping = false;
  std::map<int64_t, Slot> ready;
  std::exception_ptr worker_failure;  // what escaped a worker's loop (the queue's own allocation)
  std::vector<std::thread> workers;

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
    prefetch = std::max<int64_t>(1, options.prefetch > 0 ? options.prefetch : 2 * options.num_workers);
    batches = batch_count(options, info.samples);
  }

  ~State() { stop(); }

  void start(int64_t new_epoch, int64_t first_batch) {
    GPUTRAIN_CHECK(first_batch >= 0 && first_batch <= batches, "batch {} of an epoch of {}", first_batch, batches);
    stop();
    epoch = new_epoch;
    order = epoch_order(options, dataset->info().samples, epoch);
    wait = 0.0;
    claimed = first_batch;
    delivered = first_batch;
    stopping = false;
    worker_failure = nullptr;
    try {
      for (int64_t w = 0; w < options.num_workers && batches > 0; ++w) workers.emplace_back([this] { work(); });
    } catch (...) {
      const std::size_t started = workers.size();
      stop();
      device::rethrow_as_resource_error(
          fmt::format("starting data loader worker {} of {} (data.num_workers)", started + 1, options.num_workers),
          "Lower data.num_workers");
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    work_cv.notify_all();
    for (std::thread& worker : workers) worker.join();
    workers.clear();
    ready.clear();
    delivered = batches;  // the epoch is over: next() returns nullopt until start()
  }

  // An exception leaving a thread's function ends the process: it goes to the consumer instead.
  void work() {
    try {
      std::unique_lock<std::mutex> lock(mutex);
      while (true) {
        work_cv.wait(lock, [this] { return stopping || claimed >= batches || claimed < delivered + prefetch; });
        if (stopping || claimed >= batches) return;
        const int64_t index = claimed++;
        lock.unlock();
        Slot slot = read(index);
        lock.lock();
        ready.emplace(index, std::move(slot));
        ready_cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      worker_failure = std::current_exception();
      ready_cv.notify_all();
    }
  }

  Slot take() {
    std::unique_lock<std::mutex> lock(mutex);
    ready_cv.wait(lock, [this] { return ready.count(delivered) > 0 || worker_failure; });
    if (ready.count(delivered) == 0) {
      Slot failed;
      failed.error = worker_failure;
      return failed;
    }
    auto node = ready.extract(delivered++);
    lock.unlock();
    work_cv.notify_all();
    return std::move(node.mapped());
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
  if (s.delivered >= s.batches) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  State::Slot slot = s.options.num_workers == 0 ? s.read(s.delivered++) : s.take();
  s.wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  try {
    if (slot.error) std::rethrow_exception(slot.error);
    return s.make(std::move(slot));
  } catch (...) {
    s.stop();
    throw;
  }
}

void GpuDecodeLoader::stop() { state_->stop(); }

int64_t GpuDecodeLoader::batches_per_epoch() const { return state_->batches; }

const DatasetInfo& GpuDecodeLoader::info() const { return state_->dataset->info(); }

double GpuDecodeLoader::wait_seconds() const { return state_->wait; }

}  // namespace gputrain::data::detail
