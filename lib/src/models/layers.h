#pragma once
// What every model builder shares: the Sequential that keeps its layer names
// when cloned, and the sizes a model takes from the data set and the config.
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/models/factory.h"

namespace gputrain::models::detail {

// An empty Sequential whose clone() keeps the layer names. The stock
// SequentialImpl::clone renumbers the layers "0", "1", ..., which changes the
// checkpoint keys and breaks nn::parallel::replicate, which looks a replica's
// layers up by the original's names.
torch::nn::Sequential named_sequential();

// The number of values in one flattened sample, checked against
// model.in_features (a ConfigError naming both numbers when they differ).
int64_t checked_inputs(const config::ModelConfig& config, const ModelShape& shape);

// The data set's outputs (model.out_features must agree when set), or
// model.out_features for unlabeled data (outputs == 0).
int64_t outputs(const config::ModelConfig& config, const ModelShape& shape);

// The module's pretty print without "torch::nn::": "Conv2d(3, 6, kernel_size=[5, 5], stride=[1, 1])".
std::string pretty(const torch::nn::Module& module);

// Calls `trace` with a zero sample [1, sample_shape...] on the model's device,
// the model in eval mode under no-grad (so no random number is drawn), and
// restores the model's mode after, also when `trace` throws.
void trace_zero_sample(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape,
                       const std::function<void(torch::Tensor&)>& trace);

// Appends a "flatten" layer when a sample has more than one dimension.
void flatten_if_needed(torch::nn::Sequential& model, const ModelShape& shape);

torch::nn::Sequential make_linear(const config::ModelConfig& config, const ModelShape& shape);
torch::nn::Sequential make_mlp(const config::ModelConfig& config, const ModelShape& shape);
torch::nn::Sequential make_cifar_cnn(const config::ModelConfig& config, const ModelShape& shape);
// model.layers (declared.cpp).
torch::nn::Sequential make_declared(const config::ModelConfig& config, const ModelShape& shape);

}  // namespace gputrain::models::detail
