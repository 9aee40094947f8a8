#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "layers.h"

namespace gputrain::models::detail {

namespace {
torch::nn::AnyModule make_activation(config::Activation activation) {
  switch (activation) {
    case config::Activation::kRelu:
      return torch::nn::AnyModule(torch::nn::ReLU());
    case config::Activation::kGelu:
      return torch::nn::AnyModule(torch::nn::GELU());
    case config::Activation::kTanh:
      return torch::nn::AnyModule(torch::nn::Tanh());
  }
  config::unhandled(activation);
}
}  // namespace

// fc1, act1, [drop1], ..., fcN: one block per model.hidden width, then the
// output layer. Activation layers are named by position, not kind, so that
// switching model.activation keeps the checkpoint keys.
torch::nn::Sequential make_mlp(const config::ModelConfig& config, const ModelShape& shape) {
  if (config.hidden.empty()) {
    throw ConfigError(SourceMark{}, "model.hidden",
                      "mlp needs at least one hidden width (model.name: linear has none)");
  }
  torch::nn::Sequential model = named_sequential();
  flatten_if_needed(model, shape);
  int64_t width = checked_inputs(config, shape);
  for (std::size_t i = 0; i < config.hidden.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    model->push_back("fc" + n, torch::nn::Linear(width, config.hidden[i]));
    model->push_back("act" + n, make_activation(config.activation));
    if (config.dropout > 0) model->push_back("drop" + n, torch::nn::Dropout(config.dropout));
    width = config.hidden[i];
  }
  model->push_back("fc" + std::to_string(config.hidden.size() + 1), torch::nn::Linear(width, outputs(config, shape)));
  return model;
}

}  // namespace gputrain::models::detail
