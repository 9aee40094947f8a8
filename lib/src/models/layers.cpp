#include "layers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>

#include "gputrain/common/error.h"

namespace gputrain::models::detail {

namespace {
using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;

NamedModules layers_of(const torch::nn::SequentialImpl& list) {
  const auto* named = dynamic_cast<const NamedSequentialImpl*>(&list);
  NamedModules layers;
  for (const auto& child : list.named_children()) {
    if (named == nullptr || !named->hoisted.count(child.key())) layers.emplace_back(child.key(), child.value());
  }
  GPUTRAIN_CHECK(layers.size() == list.size(), "a list of {} layers names {}", list.size(), layers.size());
  return layers;
}
}  // namespace

std::shared_ptr<torch::nn::Module> NamedSequentialImpl::clone(const std::optional<torch::Device>& device) const {
  auto impl = std::make_shared<NamedSequentialImpl>();
  torch::nn::Sequential copy(std::static_pointer_cast<torch::nn::SequentialImpl>(impl));
  auto layer = begin();
  for (const auto& [name, module] : layers_of(*this)) add_layer(copy, name, (layer++)->clone(device));
  return impl;
}

torch::nn::Sequential named_sequential() {
  // Typed as the base: a derived pointer would pick ModuleHolder's forwarding constructor.
  std::shared_ptr<torch::nn::SequentialImpl> impl = std::make_shared<NamedSequentialImpl>();
  return torch::nn::Sequential(std::move(impl));
}

void add_layer(torch::nn::Sequential& list, const std::string& name, torch::nn::AnyModule layer) {
  auto* named = dynamic_cast<NamedSequentialImpl*>(list.get());
  GPUTRAIN_CHECK(named != nullptr, "layer {} added to a list that is not a named_sequential()", name);
  list->push_back(name, std::move(layer));
  if (const auto* hoisting = dynamic_cast<const Hoisting*>(list->ptr(list->size() - 1).get())) {
    for (const auto& [inner, module] : hoisting->hoisted_modules()) {
      list->register_module(inner, module);
      named->hoisted.insert(inner);
    }
    for (const auto& [inner, tensor] : hoisting->hoisted_parameters()) {
      list->register_parameter(inner, tensor, tensor.requires_grad());
    }
  }
}

std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> named_layers(
    const torch::nn::Sequential& list) {
  return layers_of(*list);
}

int64_t checked_inputs(const config::ModelConfig& config, const ModelShape& shape) {
  const auto& dims = shape.input_shape;
  GPUTRAIN_CHECK(!dims.empty() && std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d > 0; }),
                 "the data set describes its samples as [{}]", fmt::join(dims, ", "));
  const int64_t size = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
  if (config.in_features && *config.in_features != size) {
    throw ConfigError(SourceMark{}, "model.in_features",
                      fmt::format("is {} but the data set's samples are [{}], {} values flattened", *config.in_features,
                                  fmt::join(dims, ", "), size));
  }
  return size;
}

int64_t outputs(const config::ModelConfig& config, const ModelShape& shape) {
  if (shape.outputs < 1) {
    if (!config.out_features) {
      throw ConfigError(SourceMark{}, "model.out_features",
                        "must be set: the data set has no labels to size the model's output from");
    }
    return *config.out_features;
  }
  if (config.out_features && *config.out_features != shape.outputs) {
    throw ConfigError(
        SourceMark{}, "model.out_features",
        fmt::format("is {} but the data set has {} classes or targets", *config.out_features, shape.outputs));
  }
  return shape.outputs;
}

std::string pretty(const torch::nn::Module& module) {
  std::ostringstream text;
  module.pretty_print(text);
  std::string printed = text.str();
  const std::string prefix = "torch::nn::";
  if (printed.rfind(prefix, 0) == 0) printed.erase(0, prefix.size());
  return printed;
}

void trace_zero_sample(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape,
                       const std::function<void(torch::Tensor&)>& trace) {
  const auto parameters = model->parameters();
  const torch::Device device = parameters.empty() ? torch::Device(torch::kCPU) : parameters.front().device();
  std::vector<int64_t> shape{1};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  struct ModeRestorer {
    torch::nn::Sequential& model;
    bool training;
    ~ModeRestorer() { model->train(training); }
  } restore{model, model->is_training()};
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::zeros(shape, torch::TensorOptions().device(device));
  trace(x);
}

void flatten_if_needed(torch::nn::Sequential& model, const ModelShape& shape) {
  if (shape.input_shape.size() > 1) model->push_back("flatten", torch::nn::Flatten());
}

}  // namespace gputrain::models::detail
