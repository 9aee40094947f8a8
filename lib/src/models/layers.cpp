#include "layers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <sstream>

#include "gputrain/common/error.h"

namespace gputrain::models::detail {

namespace {
class NamedSequentialImpl : public torch::nn::SequentialImpl {
 public:
  std::shared_ptr<torch::nn::Module> clone(const std::optional<torch::Device>& device = std::nullopt) const override {
    auto copy = std::make_shared<NamedSequentialImpl>();
    auto layer = begin();
    for (const auto& child : named_children()) copy->push_back(child.key(), (layer++)->clone(device));
    return copy;
  }
};
}  // namespace

torch::nn::Sequential named_sequential() {
  // Typed as the base: a derived pointer would pick ModuleHolder's forwarding constructor.
  std::shared_ptr<torch::nn::SequentialImpl> impl = std::make_shared<NamedSequentialImpl>();
  return torch::nn::Sequential(std::move(impl));
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
