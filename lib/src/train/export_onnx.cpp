#include "gputrain/train/export_onnx.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/device/versions.h"
#include "gputrain/models/factory.h"
#include "gputrain/models/onnx_layers.h"

namespace gputrain::train {

namespace {

// mean or std as a [C, 1, 1] constant: one value per channel, broadcast over the pixels.
std::vector<float> per_channel(const std::vector<double>& values, int64_t channels) {
  std::vector<float> out;
  for (int64_t c = 0; c < channels; ++c) {
    out.push_back(static_cast<float>(values.size() == 1 ? values[0] : values.at(static_cast<std::size_t>(c))));
  }
  return out;
}

// Whether the graph starts with the data set's normalisation.
bool normalizes(const data::DatasetInfo& info, const std::vector<double>& mean, OnnxInputs inputs) {
  return info.images && !mean.empty() && inputs == OnnxInputs::kUnitImages;
}

std::string input_text(const data::DatasetInfo& info, bool normalizes) {
  if (!info.images) return "feature vectors, as the data set holds them";
  if (normalizes) return "images in [0, 1] (pixel / 255, as torchvision's ToTensor gives them), normalised inside";
  return "images in [0, 1] (pixel / 255), normalised by the mean and std in the metadata (normalize_mean, "
         "normalize_std) before they go in";
}

}  // namespace

onnx::Graph onnx_graph(torch::nn::Sequential& model, const std::string& name, const data::DatasetInfo& info,
                       const std::vector<double>& mean, const std::vector<double>& std, OnnxInputs inputs) {
  onnx::Graph graph;
  graph.name = name;
  graph.input_shape = info.input_shape;
  const bool normalized = normalizes(info, mean, inputs);
  std::string value = graph.input;
  if (normalized) {
    const int64_t channels = info.input_shape.at(0);
    value = graph.add("Sub", {value, graph.constant("normalize.mean", {channels, 1, 1}, per_channel(mean, channels))},
                      "normalize/centred");
    value = graph.add("Div", {value, graph.constant("normalize.std", {channels, 1, 1}, per_channel(std, channels))},
                      "normalize");
  }
  const models::OnnxOutput output = models::add_onnx_layers(model, info.input_shape, graph, value);
  const bool classes = info.target_kind == data::TargetKind::kClasses;
  graph.output = graph.add("Identity", {output.value}, classes ? "logits" : "values");
  graph.outputs = output.width;
  graph.metadata = {{"dataset", info.name}, {"input", input_text(info, normalized)}};
  if (info.images && !mean.empty()) {
    graph.metadata.emplace_back("normalize_mean", nlohmann::json(mean).dump());
    graph.metadata.emplace_back("normalize_std", nlohmann::json(std).dump());
  }
  if (!info.class_names.empty()) graph.metadata.emplace_back("class_names", nlohmann::json(info.class_names).dump());
  graph.doc = fmt::format("{} for {} ({}); input: {}", name, info.name,
                          classes ? "logits per class" : "regression values", input_text(info, normalized));
  return graph;
}

OnnxExportSummary export_onnx(const plan::SavedWeightsPlan& plan, const std::string& weights_path,
                              const std::string& out_path, const OnnxExportOptions& options) {
  check_output_file(out_path, {{"--checkpoint", weights_path}}, options.force);
  const config::ExperimentConfig& c = plan.loaded.config;
  const data::DatasetInfo& info = plan.data->info();
  torch::nn::Sequential model = models::make_model(c.model, models::model_shape(info, c.model));
  OnnxExportSummary summary;
  summary.weights = checkpoint::load_weights(model, weights_path, options.weights);
  const data::LoaderOptions& loader = plan.batches;
  const onnx::Graph graph = onnx_graph(model, c.name, info, loader.mean, loader.std, options.inputs);
  write_atomically(out_path, onnx::serialize(graph, device::version()));
  summary.input = input_text(info, normalizes(info, loader.mean, options.inputs));
  summary.nodes = static_cast<int64_t>(graph.nodes.size());
  summary.parameters = models::parameter_count(*model);
  return summary;
}

}  // namespace gputrain::train
