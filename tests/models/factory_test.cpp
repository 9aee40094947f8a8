#include "gputrain/models/factory.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/parallel/data_parallel.h>

#include "gputrain/common/error.h"

namespace gputrain::models {
namespace {

config::ModelConfig model_config(config::ModelName name) {
  config::ModelConfig config;
  config.name = name;
  return config;
}

config::ModelConfig mlp(std::vector<int64_t> hidden, config::Activation activation = config::Activation::kRelu,
                        double dropout = 0) {
  config::ModelConfig config = model_config(config::ModelName::kMlp);
  config.hidden = std::move(hidden);
  config.activation = activation;
  config.dropout = dropout;
  return config;
}

std::vector<std::string> layer_names(const torch::nn::Sequential& model) { return model->named_children().keys(); }

std::vector<std::string> parameter_names(const torch::nn::Module& model) { return model.named_parameters().keys(); }

std::vector<int64_t> forward_shape(torch::nn::Sequential model, std::vector<int64_t> sample) {
  sample.insert(sample.begin(), 4);
  return model->forward(torch::randn(sample)).sizes().vec();
}

// what() of the ConfigError that building the model throws, after checking its key.
std::string config_error(const config::ModelConfig& config, const ModelShape& shape, const std::string& key) {
  try {
    make_model(config, shape);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for model " << config.name;
  return "";
}

TEST(CifarCnn, HasTheSeedNetsParameterCountAndShape) {
  auto model = make_model(model_config(config::ModelName::kCifar10Cnn), {{3, 32, 32}, 10});
  EXPECT_EQ(parameter_count(*model), 62006);
  EXPECT_EQ(forward_shape(model, {3, 32, 32}), (std::vector<int64_t>{4, 10}));
}

TEST(CifarCnn, FollowsTheDataSetsChannelsAndSize) {
  // conv1 1*6*25+6 = 156, conv2 2,416, fc1 16*4*4*120+120 = 30,840, fc2 10,164, fc3 850.
  auto model = make_model(model_config(config::ModelName::kCifar10Cnn), {{1, 28, 28}, 10});
  EXPECT_EQ(parameter_count(*model), 44426);
  EXPECT_EQ(model->named_parameters()["fc1.weight"].sizes().vec(), (std::vector<int64_t>{120, 256}));
  EXPECT_EQ(forward_shape(model, {1, 28, 28}), (std::vector<int64_t>{4, 10}));
}

TEST(ForwardMacs, CountsEachLinearAndConvolutionOutputOnce) {
  // conv1 6*1*25 weights x 24*24 outputs = 86,400; conv2 16*6*25 x 8*8 = 153,600; fc 256*120 + 120*84 + 84*10.
  auto cnn = make_model(model_config(config::ModelName::kCifar10Cnn), {{1, 28, 28}, 10});
  EXPECT_EQ(forward_macs(trace_layers(cnn, {1, 28, 28})), 86400 + 153600 + 30720 + 10080 + 840);
  EXPECT_TRUE(cnn->is_training()) << "the model's mode is restored";
  // The seed MLP: 20*64 + 64*2; dropout draws nothing in the trace.
  auto seed = make_model(mlp({64}, config::Activation::kRelu, 0.5), {{20}, 2});
  const auto generator_state = at::detail::getDefaultCPUGenerator().get_state();
  EXPECT_EQ(forward_macs(trace_layers(seed, {20})), 1408);
  EXPECT_TRUE(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), generator_state));
}

TEST(CifarCnn, ParameterNamesAreTheSeedsCheckpointKeys) {
  auto model = make_model(model_config(config::ModelName::kCifar10Cnn), {{3, 32, 32}, 10});
  EXPECT_EQ(parameter_names(*model),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
                                      "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"}));
  EXPECT_EQ(layer_names(model), (std::vector<std::string>{"conv1", "relu1", "pool1", "conv2", "relu2", "pool2",
                                                          "flatten", "fc1", "relu3", "fc2", "relu4", "fc3"}));
}

TEST(CifarCnn, RejectsFeatureVectorsAndImagesTooSmall) {
  EXPECT_EQ(config_error(model_config(config::ModelName::kCifar10Cnn), {{20}, 2}, "model.name"),
            "model.name: cifar10_cnn needs image samples shaped CxHxW, but the data set's are [20] "
            "(use linear or mlp for feature vectors)");
  EXPECT_EQ(config_error(model_config(config::ModelName::kCifar10Cnn), {{3, 15, 32}, 10}, "model.name"),
            "model.name: cifar10_cnn needs images of at least 16x16 for its two 5x5 convolutions, each followed by "
            "a 2x2 max-pool, but the data set's are 3x15x32");
  EXPECT_EQ(forward_shape(make_model(model_config(config::ModelName::kCifar10Cnn), {{3, 16, 16}, 10}), {3, 16, 16}),
            (std::vector<int64_t>{4, 10}));
}

TEST(Mlp, MatchesSeed004) {
  auto model = make_model(mlp({64}), {{20}, 2});
  EXPECT_EQ(parameter_count(*model), 1474);
  EXPECT_EQ(layer_names(model), (std::vector<std::string>{"fc1", "act1", "fc2"}));
  EXPECT_EQ(forward_shape(model, {20}), (std::vector<int64_t>{4, 2}));
}

TEST(Mlp, FlattensImages) {
  auto model = make_model(mlp({32, 16}), {{1, 28, 28}, 10});
  EXPECT_EQ(layer_names(model), (std::vector<std::string>{"flatten", "fc1", "act1", "fc2", "act2", "fc3"}));
  EXPECT_EQ(forward_shape(model, {1, 28, 28}), (std::vector<int64_t>{4, 10}));
}

TEST(Mlp, BuildsTheChosenActivation) {
  const ModelShape shape{{20}, 2};
  EXPECT_NE(make_model(mlp({8}, config::Activation::kRelu), shape)->named_children()["act1"]->as<torch::nn::ReLU>(),
            nullptr);
  EXPECT_NE(make_model(mlp({8}, config::Activation::kGelu), shape)->named_children()["act1"]->as<torch::nn::GELU>(),
            nullptr);
  EXPECT_NE(make_model(mlp({8}, config::Activation::kTanh), shape)->named_children()["act1"]->as<torch::nn::Tanh>(),
            nullptr);
}

TEST(Mlp, HasDropoutOnlyWhenPositive) {
  const ModelShape shape{{20}, 2};
  EXPECT_EQ(layer_names(make_model(mlp({32, 16}, config::Activation::kRelu, 0.0), shape)),
            (std::vector<std::string>{"fc1", "act1", "fc2", "act2", "fc3"}));
  auto model = make_model(mlp({32, 16}, config::Activation::kRelu, 0.25), shape);
  EXPECT_EQ(layer_names(model), (std::vector<std::string>{"fc1", "act1", "drop1", "fc2", "act2", "drop2", "fc3"}));
  EXPECT_DOUBLE_EQ(model->named_children()["drop1"]->as<torch::nn::Dropout>()->options.p(), 0.25);
}

TEST(Mlp, NeedsAHiddenWidth) {
  EXPECT_EQ(config_error(mlp({}), {{20}, 2}, "model.hidden"),
            "model.hidden: mlp needs at least one hidden width (model.name: linear has none)");
}

TEST(Linear, IsTheSeedsSimpleModel) {
  auto model = make_model(model_config(config::ModelName::kLinear), {{10}, 1});
  EXPECT_EQ(parameter_count(*model), 11);
  EXPECT_EQ(parameter_names(*model), (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(forward_shape(model, {10}), (std::vector<int64_t>{4, 1}));
}

TEST(Linear, OutFeaturesSizeTheDataParallelDemosUnlabeledModel) {
  config::ModelConfig config = model_config(config::ModelName::kLinear);
  EXPECT_EQ(config_error(config, {{5}, 0}, "model.out_features"),
            "model.out_features: must be set: the data set has no labels to size the model's output from");
  config.out_features = 2;
  auto model = make_model(config, {{5}, 0});
  EXPECT_EQ(parameter_count(*model), 12);
  EXPECT_EQ(forward_shape(model, {5}), (std::vector<int64_t>{4, 2}));
}

TEST(Linear, FlattensImages) {
  auto model = make_model(model_config(config::ModelName::kLinear), {{3, 32, 32}, 10});
  EXPECT_EQ(layer_names(model), (std::vector<std::string>{"flatten", "fc"}));
  EXPECT_EQ(parameter_count(*model), 3072 * 10 + 10);
  EXPECT_EQ(forward_shape(model, {3, 32, 32}), (std::vector<int64_t>{4, 10}));
}

TEST(ModelSizes, InFeaturesMustMatchTheData) {
  config::ModelConfig config = model_config(config::ModelName::kLinear);
  config.in_features = 12;
  EXPECT_EQ(config_error(config, {{10}, 1}, "model.in_features"),
            "model.in_features: is 12 but the data set's samples are [10], 10 values flattened");
  EXPECT_EQ(parameter_count(*make_model(config, {{3, 2, 2}, 1})), 13);  // 12 values flattened: it fits
  config.name = config::ModelName::kCifar10Cnn;
  EXPECT_EQ(config_error(config, {{3, 32, 32}, 10}, "model.in_features"),
            "model.in_features: is 12 but the data set's samples are [3, 32, 32], 3072 values flattened");
  config.in_features = 3072;
  EXPECT_EQ(parameter_count(*make_model(config, {{3, 32, 32}, 10})), 62006);
}

TEST(ModelSizes, OutFeaturesMustMatchTheLabels) {
  config::ModelConfig config = mlp({8});
  config.out_features = 3;
  EXPECT_EQ(config_error(config, {{20}, 2}, "model.out_features"),
            "model.out_features: is 3 but the data set has 2 classes or targets");
  config.out_features = 2;
  EXPECT_EQ(forward_shape(make_model(config, {{20}, 2}), {20}), (std::vector<int64_t>{4, 2}));
}

TEST(Factory, LayerSummaryHasOneLinePerLayer) {
  const auto lines = layer_summary(make_model(model_config(config::ModelName::kCifar10Cnn), {{3, 32, 32}, 10}));
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_EQ(lines[0], "conv1: Conv2d(3, 6, kernel_size=[5, 5], stride=[1, 1]) 456 params");
  EXPECT_EQ(lines[1], "relu1: ReLU() 0 params");
  EXPECT_EQ(lines[11], "fc3: Linear(in_features=84, out_features=10, bias=true) 850 params");
}

TEST(Factory, CloneIsAnIndependentDeepCopyWithTheSameNames) {
  torch::manual_seed(0);
  auto model = make_model(mlp({16}, config::Activation::kTanh), {{6}, 3});
  const auto copy = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(parameter_names(*copy), parameter_names(*model));
  const torch::Tensor x = torch::randn({4, 6});
  EXPECT_TRUE(torch::equal(copy->forward(x), model->forward(x)));

  torch::NoGradGuard no_grad;
  const torch::Tensor before = model->named_parameters()["fc1.weight"].clone();
  copy->named_parameters()["fc1.weight"].fill_(0.5);
  EXPECT_TRUE(torch::equal(model->named_parameters()["fc1.weight"], before));
  // A clone of the clone keeps the names too (replicas of replicas).
  EXPECT_EQ(parameter_names(*copy->clone()), parameter_names(*model));
}

TEST(Factory, ReplicatesForDataParallel) {
  // nn::parallel::replicate looks each replica's layers up by the original's names.
  auto model = make_model(model_config(config::ModelName::kCifar10Cnn), {{3, 32, 32}, 10});
  const auto replicas = torch::nn::parallel::replicate(model, {torch::kCPU, torch::kCPU});
  ASSERT_EQ(replicas.size(), 2u);
  EXPECT_EQ(parameter_names(*replicas[1]), parameter_names(*model));
}

}  // namespace
}  // namespace gputrain::models
