#include "gputrain/data/dataset.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/data/tensor_dataset.h"
#include "gputrain/device/host_resources.h"
#include "images/image_ops.h"
#include "readers/formats.h"
#include "readers/readers.h"

namespace gputrain::data {

std::string Dataset::describe_sample(int64_t index) const {
  return fmt::format("{} sample {} ({})", info().name, index, info().source);
}

void Dataset::read_image(int64_t index, uint8_t* out) const {
  GPUTRAIN_CHECK(info().images && resident(), "read_image on {}, which holds no images in memory", info().name);
  const torch::Tensor& all = inputs();
  const int64_t bytes = all.numel() / all.size(0);
  std::memcpy(out, all.const_data_ptr<uint8_t>() + index * bytes, static_cast<std::size_t>(bytes));
}

void Dataset::read_resized_crop(int64_t index, const DrawCropBox& draw_box, uint8_t* out) const {
  const std::vector<int64_t>& shape = info().input_shape;
  torch::Tensor image;
  if (resident()) {
    image = inputs()[index];  // crops a view: no copy of the whole image first
  } else {
    image = torch::empty(shape, torch::kUInt8);
    read_image(index, image.data_ptr<uint8_t>());
  }
  const torch::Tensor cropped =
      detail::resized_crop(image, draw_box(shape.at(1), shape.at(2)), shape.at(1), shape.at(2)).contiguous();
  std::memcpy(out, cropped.const_data_ptr<uint8_t>(), static_cast<std::size_t>(cropped.numel()));
}

std::string TensorDataset::describe_sample(int64_t index) const {
  int64_t first = 0;
  for (const Part& part : parts_) {
    if (index < first + part.samples) {
      return fmt::format("{} sample {} ({}, record {})", info_.name, index, part.file, index - first);
    }
    first += part.samples;
  }
  return Dataset::describe_sample(index);
}

namespace detail {

namespace {
// The names the data sets' authors give their classes, in label order. MNIST's
// classes are the digits their indices already say.
std::vector<std::string> published_class_names(const std::string& name) {
  if (name == "fashion_mnist") {
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  }
  if (name == "cifar10") {
    return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  }
  return {};
}
}  // namespace

DatasetInfo image_info(const std::string& name, const std::string& source, int64_t samples,
                       std::vector<int64_t> shape) {
  DatasetInfo info;
  info.name = name;
  info.source = source;
  info.samples = samples;
  info.input_shape = std::move(shape);
  info.target_kind = TargetKind::kClasses;
  info.classes = kImageClasses;
  info.class_names = published_class_names(name);
  info.images = true;
  return info;
}

void require_directory(const std::string& name, const std::string& root, const std::string& hint) {
  std::error_code error;
  if (!std::filesystem::is_directory(root, error)) {
    throw DataError(fmt::format("{}: data.root '{}' is not a directory. {}", name, root, hint));
  }
}

bool is_data_file(const std::string& name, const std::filesystem::path& file) {
  std::error_code error;
  const auto status = std::filesystem::status(file, error);
  if (status.type() == std::filesystem::file_type::not_found) return false;
  if (error) {
    throw DataError(fmt::format("{}: cannot access {}: {}. Check the permissions of data.root.", name, file.string(),
                                error.message()));
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw DataError(fmt::format("{}: {}: {}", name, file.string(), not_a_regular_file(file)));
  }
  return true;
}

}  // namespace detail

namespace {

// data.keep_classes: the samples of those classes, relabelled by their place in
// the list, so that the model's head is as wide as the list (a first stage of
// fine-tuning trains on some classes, the second on all).
std::shared_ptr<const Dataset> keep_classes(std::shared_ptr<const Dataset> dataset, const std::vector<int64_t>& kept) {
  const DatasetInfo& info = dataset->info();
  if (info.target_kind != TargetKind::kClasses) {
    throw DataError(fmt::format("{}: data.keep_classes picks classes, but this data set has none ({}); remove the key",
                                info.name,
                                info.target_kind == TargetKind::kValues ? "regression targets" : "no labels"));
  }
  if (!dataset->resident()) {
    throw DataError(fmt::format("{}: data.keep_classes needs the images in memory; set data.cache: memory", info.name));
  }
  torch::Tensor relabel = torch::full({info.classes}, -1, torch::kInt64);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (kept[i] >= info.classes) {
      throw DataError(
          fmt::format("{}: data.keep_classes names class {}, but the data set has {} (0..{}); list classes "
                      "in that range",
                      info.name, kept[i], info.classes, info.classes - 1));
    }
    relabel[kept[i]] = static_cast<int64_t>(i);
    if (!info.class_names.empty()) names.push_back(info.class_names.at(static_cast<std::size_t>(kept[i])));
  }
  // Labels out of range are the loaders' to report, with the sample: keep them as they are.
  const torch::Tensor& targets = dataset->targets();
  const torch::Tensor in_range = targets.ge(0).logical_and(targets.lt(info.classes));
  const torch::Tensor mapped = torch::where(in_range, relabel.index({targets.clamp(0, info.classes - 1)}), targets);
  const torch::Tensor rows = torch::nonzero(mapped.ne(-1)).squeeze(1);
  DatasetInfo out = info;
  out.samples = rows.size(0);
  out.classes = static_cast<int64_t>(kept.size());
  out.class_names = std::move(names);
  return std::make_shared<TensorDataset>(std::move(out), dataset->inputs().index_select(0, rows).contiguous(),
                                         mapped.index_select(0, rows).contiguous());
}

}  // namespace

std::shared_ptr<const Dataset> make_dataset(const config::DataConfig& config, Split split, uint64_t seed,
                                            const DatasetInfo* trained) {
  const std::string root = config.root.empty() ? config::default_data_root(config.dataset) : config.root;
  const bool train = split == Split::kTrain;
  const bool generated =
      config.dataset == config::DatasetName::kRandom || config.dataset == config::DatasetName::kSynthetic;
  // A data set is held in memory whole.
  auto dataset = device::with_resource_errors(
      fmt::format("loading the {} split of {}", train ? "training" : "test", config::word(config.dataset)),
      generated ? fmt::format("Lower {}", train ? "data.samples" : "data.test_samples")
                : std::string("Free memory, or raise the process's limit"),
      [&]() -> std::shared_ptr<const Dataset> {
        switch (config.dataset) {
          case config::DatasetName::kCifar10:
            return detail::read_cifar10(root, split);
          case config::DatasetName::kFashionMnist:
          case config::DatasetName::kMnist:
            return detail::read_idx(config.dataset, root, split);
          case config::DatasetName::kNpy:
            return detail::read_npy(root, split);
          case config::DatasetName::kCsv:
            return detail::read_csv(root, config.target_column, split);
          case config::DatasetName::kImageFolder:
            return detail::read_image_folder(config, split, trained);
          case config::DatasetName::kRandom:
            return detail::make_random(config, split, seed);
          case config::DatasetName::kSynthetic:
            return detail::make_synthetic(config, split, seed);
        }
        config::unhandled(config.dataset);
      });
  if (!config.keep_classes.empty()) dataset = keep_classes(std::move(dataset), config.keep_classes);
  // Readers that know the file name it themselves; this catches the rest.
  if (dataset->info().samples == 0) {
    throw DataError(fmt::format("{}: the {} split in {} holds no samples; it needs at least one", dataset->info().name,
                                train ? "training" : "test", dataset->info().source));
  }
  return dataset;
}

config::DataConfig for_description(config::DataConfig config) {
  config.cache = config::ImageCache::kNone;
  return config;
}

}  // namespace gputrain::data
