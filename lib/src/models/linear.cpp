#include <torch/nn/modules/linear.h>

#include "layers.h"

namespace gputrain::models::detail {

// The seed's SimpleModel (10 -> 1) and the data-parallel demo's model (5 -> 2).
torch::nn::Sequential make_linear(const config::ModelConfig& config, const ModelShape& shape) {
  torch::nn::Sequential model = named_sequential();
  flatten_if_needed(model, shape);
  model->push_back("fc", torch::nn::Linear(checked_inputs(config, shape), outputs(config, shape)));
  return model;
}

}  // namespace gputrain::models::detail
