// model.freeze's mechanics: which names a prefix covers, frozen parameters,
// frozen batchnorm kept in eval mode, and dp replicas made to match.
#include "gputrain/models/freeze.h"

#include <gtest/gtest.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

namespace gputrain::models {
namespace {

// A layer with layers inside, as a residual block is.
struct BlockImpl : torch::nn::Cloneable<BlockImpl> {
  BlockImpl() { reset(); }
  void reset() override {
    fc = register_module("fc", torch::nn::Linear(4, 4));
    bn = register_module("bn", torch::nn::BatchNorm1d(4));
  }
  torch::Tensor forward(const torch::Tensor& x) { return bn(fc(x)); }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(Block);

torch::nn::Sequential net() {
  torch::nn::Sequential model;
  model->push_back("fc1", torch::nn::Linear(3, 4));
  model->push_back("bn1", torch::nn::BatchNorm1d(4));
  model->push_back("block", Block());
  model->push_back("fc10", torch::nn::Linear(4, 2));
  return model;
}

TEST(Freeze, APrefixCoversALayerOrAPathInsideOneNotANameThatMerelyStartsAlike) {
  EXPECT_TRUE(under_prefix("fc1.weight", "fc1"));
  EXPECT_TRUE(under_prefix("fc1.weight", "fc1.weight"));
  EXPECT_TRUE(under_prefix("block.bn.bias", "block.bn"));
  EXPECT_FALSE(under_prefix("fc10.weight", "fc1"));
  EXPECT_FALSE(under_prefix("fc1.weight", "fc1.w"));
}

TEST(Freeze, FrozenParametersNeedNoGradientAndTheRestTrain) {
  torch::nn::Sequential model = net();
  freeze(*model, {"fc1", "block.bn"});
  std::vector<std::string> trainable;
  for (const auto& [name, p] : trainable_parameters(*model)) trainable.push_back(name);
  EXPECT_EQ(trainable, (std::vector<std::string>{"bn1.weight", "bn1.bias", "block.fc.weight", "block.fc.bias",
                                                 "fc10.weight", "fc10.bias"}));
  model->forward(torch::randn({5, 3})).sum().backward();
  EXPECT_FALSE(model->named_parameters()["fc1.weight"].grad().defined());
  EXPECT_TRUE(model->named_parameters()["fc10.weight"].grad().defined());
}

TEST(Freeze, FrozenBatchnormStaysInEvalModeUnlessAskedToTrain) {
  torch::nn::Sequential model = net();
  freeze(*model, {"block"});
  train_mode(*model, config::FrozenBatchnorm::kEval);
  EXPECT_TRUE(model->is_training());
  EXPECT_TRUE(model->named_children()["bn1"]->is_training());  // its parameters train
  const auto block = model->named_children()["block"];
  EXPECT_FALSE(block->named_children()["bn"]->is_training());
  const torch::Tensor mean = block->named_buffers()["bn.running_mean"].clone();
  model->forward(torch::randn({5, 3}));
  EXPECT_TRUE(torch::equal(block->named_buffers()["bn.running_mean"], mean));
  train_mode(*model, config::FrozenBatchnorm::kTrain);
  EXPECT_TRUE(block->named_children()["bn"]->is_training());
  model->forward(torch::randn({5, 3}));
  EXPECT_FALSE(torch::equal(block->named_buffers()["bn.running_mean"], mean));
}

// clone() gives every parameter requires_grad and every module the default mode.
TEST(Freeze, AReplicaMirrorsTheModelsFrozenParametersAndModes) {
  torch::nn::Sequential model = net();
  freeze(*model, {"block"});
  train_mode(*model, config::FrozenBatchnorm::kEval);
  auto copy = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
  const auto params = model->parameters();
  auto copied = copy->parameters();
  ASSERT_EQ(copied.size(), params.size());
  EXPECT_TRUE(copied[4].requires_grad());  // block.fc.weight, frozen in the model
  mirror_training_state(*model, *copy);
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(copied[i].requires_grad(), params[i].requires_grad()) << i;
  const auto modules = model->modules();
  const auto copies = copy->modules();
  ASSERT_EQ(copies.size(), modules.size());
  EXPECT_FALSE(modules[5]->is_training());  // block.bn: frozen, in eval mode
  for (std::size_t i = 0; i < modules.size(); ++i) EXPECT_EQ(copies[i]->is_training(), modules[i]->is_training()) << i;
}

}  // namespace
}  // namespace gputrain::models
