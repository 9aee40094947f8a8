// A batchnorm layer's `weight` (the scale's initial value) and `train_weight`
// (false: the scale stays there while the shift trains, as airbench's).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <string>

#include "gputrain/config/load.h"
#include "gputrain/models/factory.h"

namespace gputrain::models {
namespace {

torch::nn::Sequential model_with(const std::string& norm, bool sync = false) {
  const auto loaded =
      config::load_config_text(std::string("model:\n  sync_batchnorm: ") + (sync ? "true" : "false") +
                                   "\n  layers:\n    - {type: conv2d, out_channels: 3, kernel: 3}\n    - " + norm +
                                   "\n    - relu\n    - flatten\n    - linear\n",
                               "bn.yaml");
  return make_model(loaded.config.model, {{2, 6, 6}, 4});
}

// Three SGD steps on random data, over every parameter that has a gradient.
void train_a_little(torch::nn::Sequential& model) {
  auto gen = at::detail::createCPUGenerator(2);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.5));
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    const torch::Tensor x = torch::randn({8, 2, 6, 6}, gen);
    const torch::Tensor y = torch::randint(0, 4, {8}, gen);
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    sgd.step();
  }
}

TEST(BatchnormScale, AFrozenScaleStaysAtItsInitialValueWhileTheShiftTrains) {
  for (const bool sync : {false, true}) {
    SCOPED_TRACE(sync ? "sync_batchnorm" : "batchnorm");
    torch::nn::Sequential model = model_with("{type: batchnorm, weight: 0.5, train_weight: false}", sync);
    const auto params = model->named_parameters();
    EXPECT_FALSE(params["bn1.weight"].requires_grad());
    train_a_little(model);
    EXPECT_TRUE(torch::equal(params["bn1.weight"], torch::full({3}, 0.5)));
    EXPECT_FALSE(torch::equal(params["bn1.bias"], torch::zeros({3})));
  }
}

TEST(BatchnormScale, ALearnedScaleStartsAtWeightAndTrains) {
  torch::nn::Sequential model = model_with("{type: batchnorm, weight: 2.0}");
  const auto params = model->named_parameters();
  EXPECT_TRUE(torch::equal(params["bn1.weight"], torch::full({3}, 2.0)));
  EXPECT_TRUE(params["bn1.weight"].requires_grad());
  train_a_little(model);
  EXPECT_FALSE(torch::equal(params["bn1.weight"], torch::full({3}, 2.0)));
  // The default is PyTorch's: scale 1, trained.
  EXPECT_TRUE(torch::equal(model_with("batchnorm")->named_parameters()["bn1.weight"], torch::ones({3})));
}

}  // namespace
}  // namespace gputrain::models
