#pragma once
// Models by name, shaped by the data set. Every model is a Sequential of named
// layers: one tensor in, logits (or regression values) out, cloneable for
// data-parallel replicas. Layer names are checkpoint keys: renaming one needs
// a migration.
#include <torch/nn/modules/container/sequential.h>

#include <string>
#include <vector>

#include "gputrain/config/config.h"

namespace gputrain::models {

struct ModelShape {
  std::vector<int64_t> input_shape;  // per sample, e.g. {3, 32, 32} or {20}
  int64_t outputs = 0;               // classes, or regression targets
};

// linear | mlp | cifar10_cnn. model.in_features / out_features override the
// data set's sizes where they apply; a mismatch the model cannot take is a
// ConfigError naming the key.
torch::nn::Sequential make_model(const config::ModelConfig& config, const ModelShape& shape);

int64_t parameter_count(const torch::nn::Module& model);

// One line per layer, e.g. "conv1: Conv2d(3, 6, kernel_size=[5, 5]) 456 params".
std::vector<std::string> layer_summary(const torch::nn::Sequential& model);

}  // namespace gputrain::models
