#pragma once
// Models by name, shaped by the data set. Every model is a Sequential of named
// layers: one tensor in, logits (or regression values) out, cloneable for
// data-parallel replicas (clone() is a deep copy that keeps the layer names).
// Layer names are checkpoint keys: renaming one needs a migration.
//   linear:      [flatten,] fc
//   mlp:         [flatten,] fc1, act1, [drop1,] ... fcN (one block per model.hidden width)
//   cifar10_cnn: conv1, relu1, pool1, conv2, relu2, pool2, flatten, fc1, relu3, fc2, relu4, fc3
//   layers:      model.layers as declared; unnamed layers are their type's prefix and a count (conv1, fc2),
//                or their index in a sequential (layer1.0); a residual's branches nest as res1.layers.* and
//                res1.shortcut.*, an inline residual's layers are named in the list holding it (layer1.0.conv1)
#include <torch/nn/modules/container/sequential.h>

#include <functional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"

namespace gputrain::models {

struct ModelShape {
  std::vector<int64_t> input_shape;  // per sample, e.g. {3, 32, 32} or {20}
  int64_t outputs = 0;               // classes, or regression targets
};

// The input and output sizes the data set dictates: classes or regression
// targets; for unlabeled data, model.out_features or the sample's width.
ModelShape model_shape(const data::DatasetInfo& info, const config::ModelConfig& model);

// linear | mlp | cifar10_cnn. model.in_features and model.out_features, when
// set, must equal the flattened sample size and shape.outputs; out_features
// sizes the output where the data set has no labels (outputs == 0, the
// data-parallel demo's 5 -> 2). A mismatch is a ConfigError naming the key.
torch::nn::Sequential make_model(const config::ModelConfig& config, const ModelShape& shape);

// The model for `info`'s samples, on `device`.
torch::nn::Sequential build_model(const config::ModelConfig& config, const data::DatasetInfo& info,
                                  const torch::Device& device);

// What to change when building the model runs out of memory.
inline constexpr const char* kSmallerModel = "Make the model smaller (fewer or narrower layers under model:)";

// `gputrain model`: the model built on the CPU for the samples `info`
// describes (its training split's), each layer's output shape, parameters and FLOPs.
std::string describe_model(const config::ModelConfig& model, const data::DatasetInfo& info);

int64_t parameter_count(const torch::nn::Module& model);

// Sums a tensor across the training processes, in place (ddp's all-reduce).
using SumAcrossProcesses = std::function<void(torch::Tensor&)>;
// model.sync_batchnorm: gives each batchnorm layer built with it (model.layers)
// the function that sums its batch statistics, and their gradients, across
// the processes. Returns how many layers took it.
int64_t share_batch_statistics(torch::nn::Sequential& model, const SumAcrossProcesses& sum);

// One layer of a traced forward pass: `gputrain model`'s table and the plan's arithmetic.
struct LayerRow {
  std::string name;                   // the state-dict path: "conv1", "res1.layers.conv2"
  std::string module;                 // "Conv2d(3, 64, kernel_size=[3, 3], ...)"
  std::vector<int64_t> output_shape;  // one sample's
  int64_t parameters = 0;
  int64_t macs = 0;  // multiply-adds per sample: Linear and Conv2d, which hold nearly all of a step's arithmetic
  int depth = 0;     // 1 inside a residual's branches, 2 inside a nested one, ...
};

// Traced with a zero sample of `sample_shape` on the model's device, in eval
// mode under no-grad, so no random number is drawn and the model's mode is
// restored. A residual's row sums its branches, whose rows follow it.
std::vector<LayerRow> trace_layers(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape);

// Multiply-adds of one sample's forward pass: the sum of trace_layers' top-level rows.
int64_t forward_macs(const std::vector<LayerRow>& rows);

// The rows as an aligned text table with totals: parameters and forward FLOPs (2 per multiply-add) per sample.
std::string layer_table(const std::vector<LayerRow>& rows);

// One line per layer (a residual's branches included): name, the module's
// pretty print without "torch::nn::", its parameter count; e.g.
// "conv1: Conv2d(3, 6, kernel_size=[5, 5], stride=[1, 1]) 456 params".
std::vector<std::string> layer_summary(const torch::nn::Sequential& model);

}  // namespace gputrain::models
