#include "gputrain/data/device_loader.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <fmt/format.h>

#include <algorithm>

#include "gputrain/common/error.h"
#include "loaders/batch_plan.h"

namespace gputrain::data {

struct DeviceLoader::State {
  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  torch::Device device;
  torch::Tensor inputs;   // the split on `device`: uint8 images or float32 features
  torch::Tensor targets;  // on `device`; undefined when unlabeled
  torch::Tensor scale;    // images: [1, C, 1, 1] float32, the ChannelMaps as tensors
  torch::Tensor shift;
  int64_t batches = 0;
  int64_t epoch = -1;
  torch::Tensor order;        // the epoch's sample order, int64 on `device`
  torch::Tensor first_flips;  // alternating_flip: bool per sample, mirrored in even epochs
  int64_t delivered = 0;

  State(std::shared_ptr<const Dataset> data, LoaderOptions opts, torch::Device on)
      : dataset(std::move(data)), options(std::move(opts)), device(on) {
    GPUTRAIN_CHECK(dataset != nullptr, "DeviceLoader needs a data set");
    const DatasetInfo& info = dataset->info();
    const std::vector<ChannelMap> maps = detail::checked_channel_maps(options, info);
    if (info.target_kind == TargetKind::kClasses) check_labels();
    inputs = dataset->inputs().to(device);
    if (dataset->targets().defined()) targets = dataset->targets().to(device);
    if (info.images) {
      std::vector<float> scales, shifts;
      for (const ChannelMap& m : maps) {
        scales.push_back(m.scale);
        shifts.push_back(m.shift);
      }
      const auto channels = static_cast<int64_t>(maps.size());
      scale = at::tensor(scales).view({1, channels, 1, 1}).to(device);
      shift = at::tensor(shifts).view({1, channels, 1, 1}).to(device);
    }
    batches = batch_count(options, info.samples);
    if (options.alternating_flip) {
      std::vector<int64_t> flips;
      for (int64_t row = 0; row < info.samples; ++row) flips.push_back(detail::alternating_flip(options.seed, row, 0));
      first_flips = to_device(flips).to(torch::kBool);
    }
  }

  void check_labels() const {
    const int64_t classes = dataset->info().classes;
    const int64_t* labels = dataset->targets().const_data_ptr<int64_t>();
    for (int64_t row = 0; row < dataset->info().samples; ++row) {
      if (labels[row] < 0 || labels[row] >= classes) detail::throw_bad_label(*dataset, row, labels[row]);
    }
  }

  // `values` on the device. On CUDA they go through pinned memory, so the copy
  // is asynchronous (from pageable memory it would wait for the GPU); the
  // caching host allocator keeps the buffer until the copy has read it.
  torch::Tensor to_device(const std::vector<int64_t>& values) const {
    const auto count = static_cast<int64_t>(values.size());
    torch::Tensor host =
        torch::empty({count}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(device.is_cuda()));
    std::copy(values.begin(), values.end(), host.data_ptr<int64_t>());
    return host.to(device, /*non_blocking=*/true);
  }

  // Images [B, C, H, W] uint8 -> normalised float32, augmented per the batch's
  // draws: `rows` are rows [offset, offset + B) of batch `index`, whose `whole` rows draw together.
  torch::Tensor images(const torch::Tensor& rows, int64_t index, int64_t whole, int64_t offset) const {
    torch::Tensor x = inputs.index_select(0, rows);
    if (options.resized_crop.size > 0 || options.color_jitter.on()) x = augment_each(x, index, whole, offset);
    if (options.random_crop > 0 || options.hflip) {
      const std::vector<detail::Placement> drawn = detail::draw_placements(options, options.seed, epoch, index, whole);
      const auto from = drawn.begin() + offset;
      x = place(x, std::vector<detail::Placement>(from, from + x.size(0)), rows);
    }
    return x.to(torch::kFloat32).mul_(scale).add_(shift);
  }

  // data.augment.random_resized_crop and color_jitter: one image at a time
  // (the boxes differ in size, the ops in order), by the ops HostLoader uses.
  torch::Tensor augment_each(const torch::Tensor& x, int64_t index, int64_t whole, int64_t offset) const {
    const std::vector<detail::CropBox> boxes =
        detail::draw_crop_boxes(options, options.seed, epoch, index, whole, x.size(2), x.size(3));
    const std::vector<detail::JitterDraw> jitters =
        detail::draw_color_jitters(options, options.seed, epoch, index, whole);
    std::vector<torch::Tensor> augmented;
    for (int64_t i = 0; i < x.size(0); ++i) {
      augmented.push_back(detail::augment_image(x[i], boxes, jitters, static_cast<std::size_t>(offset + i)));
    }
    return at::stack(augmented);
  }

  // Crops and mirrors each image by one gather: output pixel (y, x) of image b
  // reads the zero-padded input at (y + dy + pad, (flip ? W - 1 - x : x) + dx + pad),
  // as HostLoader's write_image does pixel by pixel; with data.augment.reflect
  // the input itself at detail::reflected positions, as write_reflected_image does.
  torch::Tensor place(const torch::Tensor& x, const std::vector<detail::Placement>& placements,
                      const torch::Tensor& rows) const {
    const int64_t count = x.size(0), channels = x.size(1), height = x.size(2), width = x.size(3);
    const int64_t pad = options.reflect ? 0 : options.random_crop;
    std::vector<int64_t> draws;  // [3, B]: dy + pad, dx + pad, flip
    draws.reserve(static_cast<std::size_t>(3 * count));
    for (const auto& p : placements) draws.push_back(p.dy + pad);
    for (const auto& p : placements) draws.push_back(p.dx + pad);
    for (const auto& p : placements) draws.push_back(p.flip ? 1 : 0);
    const torch::Tensor on_device = to_device(draws).view({3, count});
    const auto index_options = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const torch::Tensor ys = at::arange(height, index_options).view({1, height});
    const torch::Tensor xs = at::arange(width, index_options).view({1, width});
    torch::Tensor flip = on_device[2].view({count, 1}).to(torch::kBool);
    if (options.alternating_flip) {
      const torch::Tensor first = first_flips.index_select(0, rows).view({count, 1});
      flip = epoch % 2 == 1 ? first.logical_not() : first;
    }
    torch::Tensor from_rows = ys + on_device[0].view({count, 1});
    torch::Tensor from_cols = at::where(flip, (width - 1) - xs, xs) + on_device[1].view({count, 1});
    if (options.reflect) {
      from_rows = reflected(from_rows, height);
      from_cols = reflected(from_cols, width);
    }
    const torch::Tensor source = pad > 0 ? at::constant_pad_nd(x, {pad, pad, pad, pad}, 0) : x;
    return source.index({at::arange(count, index_options).view({count, 1, 1, 1}),
                         at::arange(channels, index_options).view({1, channels, 1, 1}),
                         from_rows.view({count, 1, height, 1}), from_cols.view({count, 1, 1, width})});
  }

  // detail::reflected, element-wise.
  static torch::Tensor reflected(const torch::Tensor& i, int64_t size) {
    const torch::Tensor folded = i.abs();
    return at::where(folded >= size, 2 * size - 2 - folded, folded);
  }
};

DeviceLoader::DeviceLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, torch::Device device)
    : state_(std::make_unique<State>(std::move(dataset), std::move(options), device)) {}

DeviceLoader::~DeviceLoader() = default;

void DeviceLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  State& s = *state_;
  GPUTRAIN_CHECK(first_batch >= 0 && first_batch <= s.batches, "batch {} of an epoch of {}", first_batch, s.batches);
  s.epoch = epoch;
  s.order = s.to_device(detail::epoch_order(s.options, s.dataset->info().samples, epoch));
  s.delivered = first_batch;
}

std::optional<Batch> DeviceLoader::next() {
  State& s = *state_;
  GPUTRAIN_CHECK(s.epoch >= 0, "DeviceLoader::next() called before start_epoch()");
  if (s.delivered >= s.batches) return std::nullopt;
  const int64_t index = s.delivered++;
  const int64_t first = index * s.options.batch_size;
  const int64_t whole = std::min(s.options.batch_size, s.order.size(0) - first);
  const RowRange mine = shard_rows(whole, s.options.shard);  // this process's rows (ddp: its rank's)
  const torch::Tensor rows = s.order.narrow(0, first + mine.begin, mine.end - mine.begin);
  Batch batch;
  batch.index = index;
  if (s.options.shard.count > 1) batch.whole_rows = whole;
  batch.inputs = s.dataset->info().images ? s.images(rows, index, whole, mine.begin) : s.inputs.index_select(0, rows);
  if (s.targets.defined()) batch.targets = s.targets.index_select(0, rows);
  return batch;
}

void DeviceLoader::stop() { state_->delivered = state_->batches; }

int64_t DeviceLoader::batches_per_epoch() const { return state_->batches; }

const DatasetInfo& DeviceLoader::info() const { return state_->dataset->info(); }

}  // namespace gputrain::data
