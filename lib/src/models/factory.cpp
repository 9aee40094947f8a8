#include "gputrain/models/factory.h"

#include <fmt/format.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <sstream>

#include "layers.h"

namespace gputrain::models {

namespace {
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
    case data::TargetKind::kClasses:
      shape.outputs = info.classes;
      break;
    case data::TargetKind::kValues:
      shape.outputs = info.targets;
      break;
    case data::TargetKind::kNone:
      shape.outputs = model.out_features.value_or(info.input_shape.back());
      break;
  }
  return shape;
}

torch::nn::Sequential make_model(const config::ModelConfig& config, const ModelShape& shape) {
  // The explicit registry: a new model is a case here (and a word in config's table), not a static initialiser.
  switch (config.name) {
    case config::ModelName::kLinear:
      return detail::make_linear(config, shape);
    case config::ModelName::kMlp:
      return detail::make_mlp(config, shape);
    case config::ModelName::kCifar10Cnn:
      return detail::make_cifar_cnn(config, shape);
  }
  config::unhandled(config.name);
}

int64_t parameter_count(const torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& parameter : model.parameters()) count += parameter.numel();
  return count;
}

int64_t forward_macs(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape) {
  const auto parameters = model->parameters();
  const torch::Device device = parameters.empty() ? torch::Device(torch::kCPU) : parameters.front().device();
  std::vector<int64_t> shape{1};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  const bool training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::zeros(shape, torch::TensorOptions().device(device));
  int64_t macs = 0;
  for (auto& layer : *model) {
    x = layer.forward(x);
    if (const auto* linear = layer.ptr()->as<torch::nn::LinearImpl>()) {
      macs += linear->weight.numel() * (x.numel() / x.size(-1));
    } else if (const auto* conv = layer.ptr()->as<torch::nn::Conv2dImpl>()) {
      macs += conv->weight.numel() * x.size(-2) * x.size(-1);  // each output pixel: one pass over the kernel
    }
  }
  model->train(training);
  return macs;
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
