#pragma once
// A model's layers as ONNX nodes: every layer a model builder makes (linear,
// mlp, cifar10_cnn and each model.layers type) in its evaluation form.
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gputrain/export/onnx_graph.h"

namespace gputrain::exporting {

struct OnnxOutput {
  std::string value;  // the graph's value that holds the model's outputs, [batch, width]
  int64_t width = 0;
};

// Appends `model`'s layers to `graph`, reading the value `input` ([batch,
// sample_shape...]), and returns the value that holds the model's outputs.
// Weights become initializers named by their state-dict keys ("conv1.weight"),
// a layer's node is named by its layer ("res1.layers.conv2"); batchnorm uses
// its running statistics and dropout is the identity, as in evaluation. A
// layer ONNX cannot express is a UserError naming it. The model is traced with
// a zero sample on its device in eval mode (its mode is restored), for the
// input sizes adaptive pooling needs.
OnnxOutput add_onnx_layers(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape, onnx::Graph& graph,
                           const std::string& input);

}  // namespace gputrain::exporting
