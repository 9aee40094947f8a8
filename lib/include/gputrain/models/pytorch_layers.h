#pragma once
// A model's layers as Python source for PyTorch: every layer a model builder
// makes (linear, mlp, cifar10_cnn and each model.layers type) as the torch.nn
// module that computes the same thing.
#include <torch/nn/modules/container/sequential.h>

#include <string>

namespace gputrain::models {

// `model`'s layers as the Python expression `OrderedDict([("conv1",
// nn.Conv2d(...)), ...])`, one layer a line, for a statement at column
// `indent` (nested lists 4 spaces further in). An nn.Sequential made of it
// has the parameters and buffers of `model` under the same names (its state
// dict's keys): a residual is `Residual(layers, shortcut)`, the class
// kPythonResidual defines, and batchnorm (sync_batchnorm's too) is
// nn.BatchNorm1d or 2d.
std::string pytorch_layers(const torch::nn::Sequential& model, int indent);

// The Python class `Residual` that pytorch_layers' residuals are: its
// `layers` branch plus its input, or plus its `shortcut` branch.
extern const char* const kPythonResidual;

}  // namespace gputrain::models
