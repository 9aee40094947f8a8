#include "gputrain/models/factory.h"

#include <fmt/format.h>

#include <sstream>

#include "gputrain/common/choices.h"
#include "layers.h"

namespace gputrain::models {

namespace {
using ModelFactory = torch::nn::Sequential (*)(const config::ModelConfig&, const ModelShape&);

// The explicit registry: a new model is one line here, not a static initialiser.
const ChoiceTable<ModelFactory>& model_table() {
  static const ChoiceTable<ModelFactory> table{
      {"linear", detail::make_linear},
      {"mlp", detail::make_mlp},
      {"cifar10_cnn", detail::make_cifar_cnn},
  };
  return table;
}

std::string pretty(const torch::nn::Module& module) {
  std::ostringstream text;
  module.pretty_print(text);
  std::string printed = text.str();
  const std::string prefix = "torch::nn::";
  if (printed.rfind(prefix, 0) == 0) printed.erase(0, prefix.size());
  return printed;
}
}  // namespace

ModelShape model_shape(const data::DatasetInfo& info, const config::ModelConfig& model) {
  ModelShape shape;
  shape.input_shape = info.input_shape;
  switch (info.target_kind) {
    case data::TargetKind::kClasses: shape.outputs = info.classes; break;
    case data::TargetKind::kValues: shape.outputs = info.targets; break;
    case data::TargetKind::kNone: shape.outputs = model.out_features.value_or(info.input_shape.back()); break;
  }
  return shape;
}

torch::nn::Sequential make_model(const config::ModelConfig& config, const ModelShape& shape) {
  return lookup_choice(model_table(), config.name, "model.name")(config, shape);
}

int64_t parameter_count(const torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& parameter : model.parameters()) count += parameter.numel();
  return count;
}

std::vector<std::string> layer_summary(const torch::nn::Sequential& model) {
  std::vector<std::string> lines;
  for (const auto& layer : model->named_children()) {
    lines.push_back(
        fmt::format("{}: {} {} params", layer.key(), pretty(*layer.value()), parameter_count(*layer.value())));
  }
  return lines;
}

}  // namespace gputrain::models
