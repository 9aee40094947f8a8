#include "gputrain/data/prediction_inputs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "gputrain/common/error.h"
#include "gputrain/data/tensor_dataset.h"
#include "images/image_files.h"
#include "readers/readers.h"

namespace gputrain::data {

namespace {
std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }
}  // namespace

PredictionInputs read_prediction_inputs(const std::string& path, const config::DataConfig& config,
                                        const DatasetInfo& train) {
  const std::string extension = std::filesystem::path(path).extension().string();
  torch::Tensor inputs;
  bool images = false;
  std::vector<std::string> names;
  std::error_code error;
  const bool folder = std::filesystem::is_directory(path, error);
  if (folder || detail::is_image_file(path)) {
    if (!train.images) {
      throw DataError(fmt::format("predict: {} holds images, but the model was trained on {} features", path,
                                  shape_text(train.input_shape)));
    }
    const std::vector<std::filesystem::path> files =
        folder ? detail::list_images(path) : std::vector<std::filesystem::path>{path};
    if (files.empty()) throw DataError(fmt::format("predict: {} holds no .png, .jpg or .jpeg images", path));
    if (!folder && !detail::is_data_file("predict", files.front())) {
      throw DataError(fmt::format("predict: {} does not exist", path));
    }
    // Decoded to the training images' channels and size, as image_folder decodes its test split.
    inputs = detail::decode_images(files, train.input_shape, detail::image_fit(config, Split::kTest),
                                   config.max_image_pixels);
    images = true;
    for (const auto& file : files) {
      names.push_back(folder ? std::filesystem::relative(file, path).generic_string() : file.filename().string());
    }
  } else if (extension == ".npy") {
    inputs = detail::as_samples(detail::read_npy_file(path), images);
  } else if (extension == ".csv") {
    if (config.dataset != config::DatasetName::kCsv) {
      throw DataError(
          fmt::format("predict: {} is a table, but the model was trained on {} (give a .npy of its "
                      "inputs)",
                      path, config::word(config.dataset)));
    }
    inputs = detail::read_csv_features(path, train.columns, config.target_column);
  } else {
    throw DataError(
        fmt::format("predict: {}: give an image (.png, .jpg, .jpeg) or a folder of them, a .npy of inputs "
                    "or a .csv (for `dataset: csv`), not '{}'",
                    path, extension.empty() ? "a file without extension" : extension));
  }
  const std::vector<int64_t> shape = inputs.sizes().slice(1).vec();
  if (shape != train.input_shape || images != train.images) {
    throw DataError(fmt::format("predict: {} holds {} samples of {}, but the model was trained on {} of {}", path,
                                images ? "uint8 image" : "feature", shape_text(shape),
                                train.images ? "uint8 images" : "features", shape_text(train.input_shape)));
  }
  const int64_t samples = inputs.size(0);
  DatasetInfo info = train;
  info.source = path;
  info.samples = samples;
  const torch::Tensor placeholders = train.target_kind == TargetKind::kValues
                                         ? torch::zeros({samples, train.targets}, torch::kFloat32)
                                         : torch::zeros({samples}, torch::kInt64);
  PredictionInputs out;
  if (names.empty())
    for (int64_t i = 0; i < samples; ++i) names.push_back(std::to_string(i));
  out.names = std::move(names);
  out.dataset = std::make_shared<TensorDataset>(std::move(info), inputs, placeholders,
                                                std::vector<TensorDataset::Part>{{path, samples}});
  return out;
}

}  // namespace gputrain::data
