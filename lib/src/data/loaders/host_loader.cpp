#include "gputrain/data/host_loader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>

#include "gputrain/common/error.h"
#include "images/decode_pool.h"
#include "images/image_files.h"
#include "loaders/batch_plan.h"
#include "loaders/prefetch_queue.h"

namespace gputrain::data {

namespace {

using detail::ImageShape;
using detail::Placement;

// write_image under data.augment.reflect: output pixel (y, x) reads source
// (reflected(y + dy), reflected(x' + dx)) with x' = W - 1 - x when mirrored.
void write_reflected_image(const uint8_t* src, float* dst, ImageShape shape, const ChannelMap* maps, Placement at) {
  const int64_t height = shape.height, width = shape.width, plane = height * width;
  std::vector<int64_t> columns(static_cast<std::size_t>(width));
  for (int64_t x = 0; x < width; ++x) {
    columns[static_cast<std::size_t>(x)] = detail::reflected((at.flip ? width - 1 - x : x) + at.dx, width);
  }
  for (int64_t c = 0; c < shape.channels; ++c, src += plane, dst += plane) {
    const float scale = maps[c].scale, shift = maps[c].shift;
    for (int64_t y = 0; y < height; ++y) {
      const uint8_t* in = src + detail::reflected(y + at.dy, height) * width;
      float* out = dst + y * width;
      for (int64_t x = 0; x < width; ++x)
        out[x] = static_cast<float>(in[columns[static_cast<std::size_t>(x)]]) * scale + shift;
    }
  }
}

// One image, uint8 [C, H, W] -> float [C, H, W], cropped and mirrored per
// `at`; pixels from the padding are 0 bytes before normalisation.
void write_image(const uint8_t* src, float* dst, ImageShape shape, const ChannelMap* maps, Placement at) {
  const int64_t height = shape.height, width = shape.width, plane = height * width;
  for (int64_t c = 0; c < shape.channels; ++c, src += plane, dst += plane) {
    const float scale = maps[c].scale, shift = maps[c].shift;
    for (int64_t y = 0; y < height; ++y) {
      float* out = dst + y * width;
      const int64_t sy = y + at.dy;
      if (sy < 0 || sy >= height) {
        std::fill(out, out + width, shift);
        continue;
      }
      const uint8_t* in = src + sy * width;
      // Output columns [first, last) come from the source row, the rest from
      // the padding; each loop is branch-free so it vectorises.
      const int64_t first = std::max<int64_t>(0, at.flip ? at.dx : -at.dx);
      const int64_t last = std::min(width, at.flip ? width + at.dx : width - at.dx);
      std::fill(out, out + first, shift);
      if (at.flip) {
        const int64_t mirror = width - 1 + at.dx;
        for (int64_t x = first; x < last; ++x) out[x] = static_cast<float>(in[mirror - x]) * scale + shift;
      } else {
        for (int64_t x = first; x < last; ++x) out[x] = static_cast<float>(in[x + at.dx]) * scale + shift;
      }
      std::fill(out + last, out + width, shift);
    }
  }
}

void warn_pin_memory_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    spdlog::warn("data.pin_memory: CUDA is not available, so batches stay in ordinary (pageable) memory");
  });
}

}  // namespace

struct HostLoader::State {
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  std::vector<ChannelMap> maps;
  bool pin = false;

  // Per epoch, written only while no worker runs.
  int64_t epoch = -1;
  std::vector<int64_t> order;
  double wait = 0.0;

  // data.decode_threads, when images are decoded or augmented one at a time.
  std::unique_ptr<detail::DecodePool> decoders;
  // Last: destroyed first, its workers joined while what they read is still here.
  std::unique_ptr<detail::PrefetchQueue<Slot>> queue;

  State(std::shared_ptr<const Dataset> data, LoaderOptions opts) : dataset(std::move(data)), options(std::move(opts)) {
    GPUTRAIN_CHECK(dataset != nullptr, "HostLoader needs a data set");
    const DatasetInfo& info = dataset->info();
    maps = detail::checked_channel_maps(options, info);
    GPUTRAIN_CHECK(dataset->resident()
                       ? dataset->inputs().is_contiguous() && dataset->inputs().size(0) == info.samples &&
                             dataset->inputs().scalar_type() == (info.images ? torch::kUInt8 : torch::kFloat32)
                       : info.images,
                   "data set {} stores inputs that are not contiguous {} [{}, ...]", info.name,
                   info.images ? "uint8" : "float32", info.samples);
    if (options.pin_memory) {
      pin = torch::cuda::is_available();
      if (!pin) warn_pin_memory_once();
    }
    if (options.decode_threads > 0 && works_per_image(*dataset, options)) {
      decoders = std::make_unique<detail::DecodePool>(options.decode_threads);
    }
    queue = std::make_unique<detail::PrefetchQueue<Slot>>(options.num_workers, options.prefetch,
                                                          batch_count(options, info.samples),
                                                          [this](int64_t index) { return make_slot(index); });
  }

  void start(int64_t new_epoch, int64_t first_batch) {
    queue->stop();
    epoch = new_epoch;
    order = detail::epoch_order(options, dataset->info().samples, epoch);
    wait = 0.0;
    queue->start(first_batch);
  }

  Slot make_slot(int64_t index) const {
    Slot slot;
    try {
      slot.batch = make_batch(index);
    } catch (...) {
      slot.error = std::current_exception();
    }
    return slot;
  }

  torch::TensorOptions output(torch::ScalarType type) const {
    return torch::TensorOptions().dtype(type).pinned_memory(pin);
  }

  // This process's rows of batch `index` (all of them but under ddp).
  Batch make_batch(int64_t index) const {
    const int64_t first = index * options.batch_size;
    const int64_t whole = std::min(options.batch_size, dataset->info().samples - first);
    const RowRange mine = shard_rows(whole, options.shard);
    const int64_t count = mine.end - mine.begin;
    const int64_t* rows = order.data() + first + mine.begin;
    Batch batch;
    batch.index = index;
    if (options.shard.count > 1) batch.whole_rows = whole;
    batch.inputs = dataset->info().images ? gather_images(rows, count, index, whole, mine.begin)
                                          : gather_rows(dataset->inputs(), rows, count);
    switch (dataset->info().target_kind) {
      case TargetKind::kClasses:
        batch.targets = gather_labels(rows, count);
        break;
      case TargetKind::kValues:
        batch.targets = gather_rows(dataset->targets(), rows, count);
        break;
      case TargetKind::kNone:
        break;
    }
    return batch;
  }

  torch::Tensor gather_rows(const torch::Tensor& source, const int64_t* rows, int64_t count) const {
    std::vector<int64_t> shape = source.sizes().vec();
    shape[0] = count;
    torch::Tensor out = torch::empty(shape, output(source.scalar_type()));
    const auto row_bytes = static_cast<std::size_t>(source.stride(0) * source.element_size());
    const auto* from = static_cast<const char*>(source.const_data_ptr());
    auto* to = static_cast<char*>(out.data_ptr());
    for (int64_t i = 0; i < count; ++i) std::memcpy(to + i * row_bytes, from + rows[i] * row_bytes, row_bytes);
    return out;
  }

  // Labels, checked: a Dataset implemented elsewhere may hold bad ones, and
  // the error must name the sample rather than surface later as a CUDA assert.
  torch::Tensor gather_labels(const int64_t* rows, int64_t count) const {
    const int64_t classes = dataset->info().classes;
    const int64_t* from = dataset->targets().const_data_ptr<int64_t>();
    torch::Tensor out = torch::empty({count}, output(torch::kInt64));
    int64_t* to = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t label = from[rows[i]];
      if (label < 0 || label >= classes) detail::throw_bad_label(*dataset, rows[i], label);
      to[i] = label;
    }
    return out;
  }

  // `count` images from row `offset` of batch `index`, whose `whole` rows draw their augmentation together.
  torch::Tensor gather_images(const int64_t* rows, int64_t count, int64_t index, int64_t whole, int64_t offset) const {
    const std::vector<int64_t>& s = dataset->info().input_shape;
    const ImageShape shape{s.at(0), s.at(1), s.at(2)};
    const int64_t sample = shape.channels * shape.height * shape.width;
    torch::Tensor out = torch::empty({count, shape.channels, shape.height, shape.width}, output(torch::kFloat32));
    const bool resized_crop = options.resized_crop.size > 0;
    const uint8_t* from = dataset->resident() && !resized_crop ? dataset->inputs().const_data_ptr<uint8_t>() : nullptr;
    float* to = out.data_ptr<float>();
    std::vector<Placement> placements = detail::draw_placements(options, options.seed, epoch, index, whole);
    if (options.alternating_flip) {
      for (int64_t i = 0; i < count; ++i) {
        placements[static_cast<std::size_t>(offset + i)].flip = detail::alternating_flip(options.seed, rows[i], epoch);
      }
    }
    const std::vector<detail::JitterDraw> jitters =
        detail::draw_color_jitters(options, options.seed, epoch, index, whole);
    const auto write = options.reflect ? write_reflected_image : write_image;
    const auto make_image = [&](int64_t i) {
      const int64_t position = offset + i;
      // Decoded or cropped pixels: kept per thread, as every image of the split has the same size.
      thread_local std::vector<uint8_t> decoded;
      if (!from) decoded.resize(static_cast<std::size_t>(sample));
      if (resized_crop) {
        // The box is drawn on the image's own size: a file's as stored, a resident set's as held.
        dataset->read_resized_crop(
            rows[i],
            [&](int64_t height, int64_t width) {
              return detail::draw_crop_box(options, options.seed, epoch, index, position, height, width);
            },
            decoded.data());
      } else if (!from) {
        dataset->read_image(rows[i], decoded.data());
      }
      const uint8_t* image = from ? from + rows[i] * sample : decoded.data();
      torch::Tensor jittered;
      if (!jitters.empty()) {
        const torch::Tensor plain =
            torch::from_blob(const_cast<uint8_t*>(image), {shape.channels, shape.height, shape.width}, torch::kUInt8);
        jittered = detail::color_jitter(plain, jitters[static_cast<std::size_t>(position)]).contiguous();
        image = jittered.const_data_ptr<uint8_t>();
      }
      write(image, to + i * sample, shape, maps.data(), placements[static_cast<std::size_t>(position)]);
    };
    // Images decoded or augmented one at a time go to the decode threads, each image a task.
    if (decoders) {
      decoders->run(count, make_image);
    } else {
      for (int64_t i = 0; i < count; ++i) make_image(i);
    }
    return out;
  }
};

HostLoader::HostLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : state_(std::make_unique<State>(std::move(dataset), std::move(options))) {}

HostLoader::~HostLoader() = default;

void HostLoader::start_epoch(int64_t epoch, int64_t first_batch) { state_->start(epoch, first_batch); }

std::optional<Batch> HostLoader::next() {
  State& s = *state_;
  GPUTRAIN_CHECK(s.epoch >= 0, "HostLoader::next() called before start_epoch()");
  if (s.queue->done()) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  State::Slot slot = s.queue->next();
  s.wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (slot.error) {
    s.queue->stop();
    std::rethrow_exception(slot.error);
  }
  return std::move(slot.batch);
}

void HostLoader::stop() { state_->queue->stop(); }

int64_t HostLoader::batches_per_epoch() const { return state_->queue->batches(); }

const DatasetInfo& HostLoader::info() const { return state_->dataset->info(); }

double HostLoader::wait_seconds() const { return state_->wait; }

}  // namespace gputrain::data
