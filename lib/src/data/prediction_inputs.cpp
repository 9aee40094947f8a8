#include "gputrain/data/prediction_inputs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "gputrain/common/error.h"
#include "gputrain/data/tensor_dataset.h"
#include "readers.h"

namespace gputrain::data {

namespace {
std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }
}  // namespace

PredictionInputs read_prediction_inputs(const std::string& path, const config::DataConfig& config,
                                        const DatasetInfo& train) {
  const std::string extension = std::filesystem::path(path).extension().string();
  torch::Tensor inputs;
  bool images = false;
  if (extension == ".npy") {
    inputs = detail::as_samples(detail::read_npy_file(path), images);
  } else if (extension == ".csv") {
    if (config.dataset != config::DatasetName::kCsv) {
      throw DataError(
          fmt::format("predict: {} is a table, but the model was trained on {} (give a .npy of its "
                      "inputs)",
                      path, config::word(config.dataset)));
    }
    inputs = detail::read_csv_features(path, config.root, config.target_column);
  } else {
    throw DataError(fmt::format("predict: {}: give a .npy of inputs or a .csv (for `dataset: csv`), not '{}'", path,
                                extension.empty() ? "a file without extension" : extension));
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
  for (int64_t i = 0; i < samples; ++i) out.names.push_back(std::to_string(i));
  out.dataset = std::make_shared<TensorDataset>(std::move(info), inputs, placeholders,
                                                std::vector<TensorDataset::Part>{{path, samples}});
  return out;
}

}  // namespace gputrain::data
