#include "gputrain/export/export_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/pixel_map.h"
#include "gputrain/device/versions.h"
#include "gputrain/export/onnx_layers.h"
#include "gputrain/export/pytorch_layers.h"
#include "gputrain/models/factory.h"
#include "gputrain/train/evaluate.h"

namespace gputrain::exporting {

namespace {

// The loaders' per-channel scales and shifts (data::channel_maps), to be
// applied to 255 x as they apply them to the pixel byte: 255 x is the byte
// again for x = byte / 255 in float32, for each of the 256 bytes.
struct PixelMaps {
  std::vector<float> scale, shift;
};
PixelMaps pixel_maps(const std::vector<double>& mean, const std::vector<double>& std, int64_t channels) {
  PixelMaps maps;
  for (const data::ChannelMap& m : data::channel_maps(mean, std, channels)) {
    maps.scale.push_back(m.scale);
    maps.shift.push_back(m.shift);
  }
  return maps;
}

// Floats as Python literals that read back as the same float32 values.
std::string python_floats(const std::vector<float>& values) {
  return nlohmann::json(std::vector<double>(values.begin(), values.end())).dump();
}

// Whether the graph starts with the data set's normalisation.
bool normalizes(const data::DatasetInfo& info, const std::vector<double>& mean, ModelInputs inputs) {
  return info.images && !mean.empty() && inputs == ModelInputs::kUnitImages;
}

// Whether the graph starts with the loaders' pixel map: the normalisation, or
// without data.normalize the loaders' byte * float(1 / 255), which is not
// always the float byte / 255 the model is given.
bool maps_pixels(const data::DatasetInfo& info, ModelInputs inputs) {
  return info.images && inputs == ModelInputs::kUnitImages;
}

std::string input_text(const data::DatasetInfo& info, const std::vector<double>& mean, ModelInputs inputs,
                       ModelFormat format) {
  if (!info.images) return "feature vectors, as the data set holds them";
  if (mean.empty()) return "images in [0, 1] (pixel / 255, as torchvision's ToTensor gives them)";
  if (normalizes(info, mean, inputs)) {
    return "images in [0, 1] (pixel / 255, as torchvision's ToTensor gives them), normalised inside";
  }
  return fmt::format("images in [0, 1] (pixel / 255), normalised by the mean and std in {} before they go in",
                     format == ModelFormat::kOnnx ? "the metadata (normalize_mean, normalize_std)"
                                                  : "NORMALIZE_MEAN and NORMALIZE_STD");
}

// The 3-line load imports the module by its file's name, so that must be a Python identifier; not a keyword
// (`from import import Model` does not parse), nor a module the file imports, which it would hide from itself.
void check_python_module_name(const std::string& out_path) {
  const std::filesystem::path path(out_path);
  const std::string stem = path.stem().string();
  const bool identifier = !stem.empty() && std::isdigit(static_cast<unsigned char>(stem[0])) == 0 &&
                          std::all_of(stem.begin(), stem.end(), [](char ch) {
                            return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_';
                          });
  static const std::set<std::string> kTaken{
      "False",    "None",   "True",  "and",  "as",     "assert",   "async",      "await", "break", "class",
      "continue", "def",    "del",   "elif", "else",   "except",   "finally",    "for",   "from",  "global",
      "if",       "import", "in",    "is",   "lambda", "nonlocal", "not",        "or",    "pass",  "raise",
      "return",   "try",    "while", "with", "yield",  "torch",    "collections"};
  if (path.extension() != ".py" || !identifier) {
    throw UserError(fmt::format(
        "--out {}: --format pytorch writes a Python module, whose file name is letters, digits and '_' (not "
        "starting with a digit) and ends in .py, e.g. model.py",
        out_path));
  }
  if (kTaken.count(stem) != 0) {
    throw UserError(fmt::format(
        "--out {}: '{}' cannot name the Python module --format pytorch writes: {}; choose another name, e.g. "
        "model.py",
        out_path, stem,
        stem == "torch" || stem == "collections"
            ? fmt::format("the module imports {0}, and a file {0}.py beside it would be imported instead", stem)
            : "it is a Python keyword, so `from " + stem + " import Model` does not parse"));
  }
}

// What an export leaves out of a run with train.tta: "" without it.
std::string left_out_views(const config::TtaConfig& views) {
  const train::TestTimeAugmentation tta = train::test_time_augmentation(views);
  if (!tta.enabled()) return "";
  return fmt::format(
      "test-time views are not inside the exported network: it scores each image alone, as `gputrain predict --tta "
      "off` does, while the run's evaluations, `gputrain test` and `gputrain predict` average {}",
      train::describe_views(tta));
}

}  // namespace

onnx::Graph onnx_graph(torch::nn::Sequential& model, const std::string& name, const data::DatasetInfo& info,
                       const std::vector<double>& mean, const std::vector<double>& std, ModelInputs inputs) {
  onnx::Graph graph;
  graph.name = name;
  graph.input_shape = info.input_shape;
  std::string value = graph.input;
  if (maps_pixels(info, inputs)) {  // (255 x) * scale + shift, rounded as the loaders round
    const int64_t channels = info.input_shape.at(0);
    const PixelMaps maps = pixel_maps(mean, std, channels);
    value = graph.add("Mul", {value, graph.constant("normalize.bytes", {}, {255.0f})}, "normalize/bytes");
    value =
        graph.add("Mul", {value, graph.constant("normalize.scale", {channels, 1, 1}, maps.scale)}, "normalize/scaled");
    value = graph.add("Add", {value, graph.constant("normalize.shift", {channels, 1, 1}, maps.shift)}, "normalize");
  }
  const OnnxOutput output = add_onnx_layers(model, info.input_shape, graph, value);
  const bool classes = info.target_kind == data::TargetKind::kClasses;
  graph.output = graph.add("Identity", {output.value}, classes ? "logits" : "values");
  graph.outputs = output.width;
  graph.metadata = {{"dataset", info.name}, {"input", input_text(info, mean, inputs, ModelFormat::kOnnx)}};
  if (info.images && !mean.empty()) {
    graph.metadata.emplace_back("normalize_mean", nlohmann::json(mean).dump());
    graph.metadata.emplace_back("normalize_std", nlohmann::json(std).dump());
  }
  if (!info.class_names.empty()) graph.metadata.emplace_back("class_names", nlohmann::json(info.class_names).dump());
  graph.doc =
      fmt::format("{} for {} ({}); input: {}", name, info.name, classes ? "logits per class" : "regression values",
                  input_text(info, mean, inputs, ModelFormat::kOnnx));
  return graph;
}

std::string pytorch_module(const torch::nn::Sequential& model, const std::string& name, const data::DatasetInfo& info,
                           const std::vector<double>& mean, const std::vector<double>& std, ModelInputs inputs,
                           const std::string& state_dict, const std::string& left_out_views) {
  const bool normalized = normalizes(info, mean, inputs);
  const bool classes = info.target_kind == data::TargetKind::kClasses;
  const std::string layers = pytorch_layers(model, 8);
  const std::string module = std::filesystem::path(state_dict).stem().string();
  const bool mapped = maps_pixels(info, inputs);
  std::string pixel_map;
  if (mapped) {
    const PixelMaps maps = pixel_maps(mean, std, info.input_shape.at(0));
    pixel_map = fmt::format(
        R"(# Model's first step, the float32 operations of gputrain's loader in its order, per
# channel: x * 255 * PIXEL_SCALE + PIXEL_SHIFT. x * 255 is the pixel byte again;
# PIXEL_SCALE is 1 / (255 std) and PIXEL_SHIFT -mean / std, each rounded to float32
# (1 / 255 and 0 without data.normalize), so the layers get the floats gputrain's get.
PIXEL_SCALE = {}
PIXEL_SHIFT = {}
)",
        python_floats(maps.scale), python_floats(maps.shift));
  }
  std::string source = fmt::format(
      R"("""The network of gputrain's experiment {name} for {dataset}, as a PyTorch module: {outputs}.

Written by gputrain {version} (`gputrain export --format pytorch`). Its weights are the state
dict {state_dict} beside this file, whose keys are gputrain's names:

    import torch
    from {module} import Model
    model = Model(); model.load_state_dict(torch.load("{state_dict}")); model.eval()

The input: INPUT below.
"""
from collections import OrderedDict

import torch
from torch import nn

NAME = {name_literal}
INPUT = {input}
NORMALIZE_MEAN = {mean}  # data.normalize: {normalize}
NORMALIZE_STD = {std}
CLASS_NAMES = {class_names}
{views}{pixel_map}
)",
      fmt::arg("name", name), fmt::arg("dataset", info.name),
      fmt::arg("outputs", classes ? "logits per class" : "regression values"), fmt::arg("version", device::version()),
      fmt::arg("state_dict", std::filesystem::path(state_dict).filename().string()), fmt::arg("module", module),
      fmt::arg("name_literal", nlohmann::json(name).dump()),
      fmt::arg("input", nlohmann::json(input_text(info, mean, inputs, ModelFormat::kPytorch)).dump()),
      fmt::arg("mean", nlohmann::json(mean).dump()), fmt::arg("std", nlohmann::json(std).dump()),
      fmt::arg("normalize", normalized     ? "Model normalises its input with these"
                            : mean.empty() ? "none"
                                           : "the caller normalises the input with these"),
      fmt::arg("class_names", nlohmann::json(info.class_names).dump()),
      fmt::arg("views", left_out_views.empty()
                            ? ""
                            : fmt::format("TEST_TIME_VIEWS = {}\n", nlohmann::json(left_out_views).dump())),
      fmt::arg("pixel_map", pixel_map));
  // Only the classes the model uses beyond torch.nn (a residual, a token layer, ...).
  const bool root_hoists = pytorch_hoists(model);
  source += pytorch_classes(model, layers);
  source += fmt::format(R"(
class Model({base}):
    """{name}'s layers, named as gputrain names them."""

    def __init__(self):
        super().__init__({layers})
)",
                        fmt::arg("base", root_hoists ? "Layers" : "nn.Sequential"), fmt::arg("name", name),
                        fmt::arg("layers", layers));
  if (mapped) {
    // Not state: load_state_dict(strict=True) takes gputrain's state dict as it is.
    source +=
        R"(        scale, shift = (torch.tensor(v, dtype=torch.float32).reshape(-1, 1, 1) for v in (PIXEL_SCALE, PIXEL_SHIFT))
        self.register_buffer("pixel_scale", scale, persistent=False)
        self.register_buffer("pixel_shift", shift, persistent=False)

    def forward(self, x):
        return super().forward(x * 255 * self.pixel_scale + self.pixel_shift)
)";
  }
  return source;
}

std::string pytorch_state_dict_path(const std::string& py_path) {
  return std::filesystem::path(py_path).replace_extension(".pt").string();
}

ModelExportSummary export_model(const plan::RunPlan& plan, const std::string& weights_path, const std::string& out_path,
                                const ModelExportOptions& options) {
  std::vector<NamedPath> inputs{{"--checkpoint", weights_path}};
  for (const std::string& file : options.config_files) inputs.push_back({"--config", file});
  check_output_file(out_path, inputs, options.force);
  const bool pytorch = options.format == ModelFormat::kPytorch;
  const std::string state_dict = pytorch ? pytorch_state_dict_path(out_path) : "";
  if (pytorch) check_python_module_name(out_path);
  if (pytorch) check_output_file(state_dict, inputs, options.force, "--out's state dict");
  const data::DatasetInfo& info = plan.trained;
  torch::nn::Sequential model = models::make_model(plan.network, models::model_shape(info, plan.network));
  ModelExportSummary summary;
  summary.weights = checkpoint::load_weights(model, weights_path, options.weights);
  const data::LoaderOptions& loader = plan.test_loader;
  summary.input = input_text(info, loader.mean, options.inputs, options.format);
  summary.parameters = models::parameter_count(*model);
  summary.files = {out_path};
  // The run's evaluations averaged views of each image; the network scores one.
  const std::string views = left_out_views(plan.evaluation.tta);
  if (!views.empty()) spdlog::info("{}", views);
  if (!pytorch) {
    onnx::Graph graph = onnx_graph(model, plan.name, info, loader.mean, loader.std, options.inputs);
    if (!views.empty()) graph.metadata.emplace_back("test_time_views", views);
    write_atomically(out_path, onnx::serialize(graph, device::version()), options.write_hooks);
    return summary;
  }
  const std::string source =
      pytorch_module(model, plan.name, info, loader.mean, loader.std, options.inputs, state_dict, views);
  // The pair or neither, the module last: a module without its weights is half an export, and a pair that
  // cannot be written in full leaves an earlier export's pair as it was.
  const std::string weights = checkpoint::state_dict_bytes(*model);
  write_atomically_together({{state_dict, weights}, {out_path, source}}, options.write_hooks);
  summary.files.push_back(state_dict);
  return summary;
}

}  // namespace gputrain::exporting
