#pragma once
// A model's layers as Python source for PyTorch: every layer a model builder
// makes (linear, mlp, cifar10_cnn and each model.layers type) as the torch.nn
// module that computes the same thing.
#include <torch/nn/modules/container/sequential.h>

#include <string>

namespace gputrain::exporting {

// `model`'s layers as the Python expression `OrderedDict([("conv1",
// nn.Conv2d(...)), ...])`, one layer a line, for a statement at column
// `indent` (nested lists 4 spaces further in). An nn.Sequential made of it
// has the parameters and buffers of `model` under the same names (its state
// dict's keys): a residual is `Residual(layers, shortcut[, inline=True])`,
// the class kPythonResidual defines, a sequential an nn.Sequential (or a
// Layers), and batchnorm (sync_batchnorm's too) is nn.BatchNorm1d or 2d.
std::string pytorch_layers(const torch::nn::Sequential& model, int indent);

// The Python class `Residual` that pytorch_layers' residuals are: its
// `layers` branch plus its input, or plus its `shortcut` branch.
extern const char* const kPythonResidual;

// The Python class `Layers`, an nn.Sequential that registers what its layers
// hoist (an inline residual's modules, a class token's tensor) under their
// own names: pytorch_layers' lists where pytorch_hoists, and the model's base
// class where its own list does.
extern const char* const kPythonLayers;
bool pytorch_hoists(const torch::nn::Sequential& layers);

// The Python classes `layers` (pytorch_layers(model)) uses beyond torch.nn:
// Residual, Layers, and the token layers' (PatchEmbedding, Hoisted,
// SelfAttention, Token), each defined once.
std::string pytorch_classes(const torch::nn::Sequential& model, const std::string& layers);

}  // namespace gputrain::exporting
