#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "gputrain/common/choices.h"
#include "layers.h"

namespace gputrain::models::detail {

namespace {
using ActivationFactory = torch::nn::AnyModule (*)();

const ChoiceTable<ActivationFactory>& activations() {
  static const ChoiceTable<ActivationFactory> table{
      {"relu", [] { return torch::nn::AnyModule(torch::nn::ReLU()); }},
      {"gelu", [] { return torch::nn::AnyModule(torch::nn::GELU()); }},
      {"tanh", [] { return torch::nn::AnyModule(torch::nn::Tanh()); }},
  };
  return table;
}
}  // namespace

// fc1, act1, [drop1], ..., fcN: one block per model.hidden width, then the
// output layer. Activation layers are named by position, not kind, so that
// switching model.activation keeps the checkpoint keys.
torch::nn::Sequential make_mlp(const config::ModelConfig& config, const ModelShape& shape) {
  if (config.hidden.empty()) {
    throw ConfigError(SourceMark{}, "model.hidden", "mlp needs at least one hidden width (model.name: linear has none)");
  }
  const ActivationFactory activation = lookup_choice(activations(), config.activation, "model.activation");
  torch::nn::Sequential model = named_sequential();
  flatten_if_needed(model, shape);
  int64_t width = checked_inputs(config, shape);
  for (std::size_t i = 0; i < config.hidden.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    model->push_back("fc" + n, torch::nn::Linear(width, config.hidden[i]));
    model->push_back("act" + n, activation());
    if (config.dropout > 0) model->push_back("drop" + n, torch::nn::Dropout(config.dropout));
    width = config.hidden[i];
  }
  model->push_back("fc" + std::to_string(config.hidden.size() + 1), torch::nn::Linear(width, outputs(config, shape)));
  return model;
}

}  // namespace gputrain::models::detail
