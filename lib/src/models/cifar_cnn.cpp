#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "gputrain/common/error.h"
#include "layers.h"

namespace gputrain::models::detail {

namespace {
constexpr int64_t kKernel = 5;

// The side of a feature map after a valid 5x5 convolution and a 2x2 max-pool.
int64_t conv_pool_side(int64_t side) { return (side - (kKernel - 1)) / 2; }
}  // namespace

// The seed's Net (PyTorch's CIFAR-10 tutorial): 62,006 parameters on 3x32x32.
// Input channels and fc1's width follow the data set, so it also takes 1x28x28.
torch::nn::Sequential make_cifar_cnn(const config::ModelConfig& config, const ModelShape& shape) {
  const auto& dims = shape.input_shape;
  if (dims.size() != 3) {
    throw ConfigError(SourceMark{}, "model.name",
                      fmt::format("cifar10_cnn needs image samples shaped CxHxW, but the data set's are [{}] "
                                  "(use linear or mlp for feature vectors)",
                                  fmt::join(dims, ", ")));
  }
  checked_inputs(config, shape);  // only to check model.in_features
  const int64_t height = conv_pool_side(conv_pool_side(dims[1]));
  const int64_t width = conv_pool_side(conv_pool_side(dims[2]));
  if (height < 1 || width < 1) {
    throw ConfigError(SourceMark{}, "model.name",
                      fmt::format("cifar10_cnn needs images of at least 16x16 for its two 5x5 convolutions, each "
                                  "followed by a 2x2 max-pool, but the data set's are {}x{}x{}",
                                  dims[0], dims[1], dims[2]));
  }
  torch::nn::Sequential model = named_sequential();
  model->push_back("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(dims[0], 6, kKernel)));
  model->push_back("relu1", torch::nn::ReLU());
  model->push_back("pool1", torch::nn::MaxPool2d(2));
  model->push_back("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, kKernel)));
  model->push_back("relu2", torch::nn::ReLU());
  model->push_back("pool2", torch::nn::MaxPool2d(2));
  model->push_back("flatten", torch::nn::Flatten());
  model->push_back("fc1", torch::nn::Linear(16 * height * width, 120));
  model->push_back("relu3", torch::nn::ReLU());
  model->push_back("fc2", torch::nn::Linear(120, 84));
  model->push_back("relu4", torch::nn::ReLU());
  model->push_back("fc3", torch::nn::Linear(84, outputs(config, shape)));
  return model;
}

}  // namespace gputrain::models::detail
