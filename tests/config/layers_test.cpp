// model.layers as the reader takes it: shorthand, nesting, the dump's round
// trip, and each error naming the layer at its file position.
#include <gtest/gtest.h>

#include <string>

#include "gputrain/common/error.h"
#include "gputrain/config/layer_keys.h"
#include "gputrain/config/load.h"

namespace gputrain::config {
namespace {

ModelConfig model_of(const std::string& layers) {
  return load_config_text("model:\n  name: layers\n  layers:\n" + layers, "x.yaml").config.model;
}

// what() of the error that loading `layers` gives.
std::string error_of(const std::string& layers) {
  try {
    model_of(layers);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << layers;
  return "";
}

TEST(LayerConfig, ReadsTypesKeysNamesAndNestedBranches) {
  const ModelConfig model = model_of(
      "    - {type: conv2d, out_channels: 8, kernel: 3, padding: 1, bias: false}\n"
      "    - relu\n"
      "    - type: residual\n"
      "      name: block\n"
      "      layers: [{type: conv2d, out_channels: 16, kernel: 3, stride: 2, padding: 1}, {type: batchnorm, "
      "momentum: 0.2}]\n"
      "      shortcut: [{type: conv2d, out_channels: 16, kernel: 1, stride: 2}]\n"
      "    - {type: dropout, p: 0.25}\n");
  ASSERT_EQ(model.layers.size(), 4u);
  EXPECT_EQ(model.layers[0].type, LayerType::kConv2d);
  EXPECT_EQ(layer_integer(model.layers[0], "out_channels"), 8);
  EXPECT_EQ(layer_integer(model.layers[0], "stride"), 1);  // the default
  EXPECT_EQ(layer_integer(model.layers[0], "bias"), 0);
  EXPECT_EQ(model.layers[1].type, LayerType::kRelu);
  const LayerConfig& block = model.layers[2];
  EXPECT_EQ(block.name, "block");
  ASSERT_EQ(block.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(*layer_value(block.layers[1], "momentum"), 0.2);
  EXPECT_EQ(block.layers[1].path, "model.layers[2].layers[1]");
  EXPECT_EQ(block.layers[1].mark.line, 8);  // the flow list's line
  ASSERT_EQ(block.shortcut.size(), 1u);
  EXPECT_DOUBLE_EQ(*layer_value(model.layers[3], "p"), 0.25);
  LayerConfig pool;
  pool.type = LayerType::kMaxpool;
  EXPECT_FALSE(layer_value(pool, "stride").has_value());  // derived: the kernel
}

TEST(LayerConfig, DumpWritesBackWhatTheFileGave) {
  const auto loaded = load_config_text(
      "model:\n  name: layers\n  layers:\n    - {type: linear, out_features: 32, name: hidden}\n    - gelu\n"
      "    - {type: residual, layers: [{type: linear, out_features: 32}]}\n    - linear\n",
      "x.yaml");
  const std::string dumped = dump_config(loaded.config);
  EXPECT_NE(dumped.find("{type: linear, name: hidden, out_features: 32}"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("{type: residual, layers: [{type: linear, out_features: 32}]}"), std::string::npos) << dumped;
  EXPECT_EQ(load_config_text(dumped, "dumped.yaml").config.model.layers, loaded.config.model.layers);
}

TEST(LayerConfig, ErrorsNameTheLayerAtItsPosition) {
  EXPECT_EQ(error_of("    - relu\n    - {type: conv, out_channels: 4}\n"),
            "x.yaml:5:14: model.layers[1]: unknown layer type: unknown value 'conv'; allowed: conv2d, batchnorm, "
            "layernorm, relu, gelu, silu, tanh, leaky_relu, maxpool, avgpool, adaptive_avgpool, flatten, linear, "
            "dropout, residual, sequential, patch_embedding, class_token, position_embedding, self_attention or token "
            "(did you mean 'conv2d'?)");
  EXPECT_EQ(error_of("    - relu\n    - relu\n    - {type: linear, out_feature: 4}\n"),
            "x.yaml:6:22: model.layers[2] (linear): unknown key `out_feature` (did you mean `out_features`?); "
            "linear takes type, name, out_features or bias");
  EXPECT_EQ(error_of("    - {type: conv2d, out_channels: 4}\n"),
            "x.yaml:4:7: model.layers[0] (conv2d): needs `kernel` (square kernel side)");
  EXPECT_EQ(error_of("    - {type: conv2d, out_channels: 0, kernel: 3}\n"),
            "x.yaml:4:36: model.layers[0] (conv2d): `out_channels` must be >= 1 (got '0')");
  EXPECT_EQ(error_of("    - {type: conv2d, out_channels: 2.5, kernel: 3}\n"),
            "x.yaml:4:36: model.layers[0] (conv2d): `out_channels` must be an integer (got '2.5')");
  EXPECT_EQ(error_of("    - {type: dropout, p: 1}\n"),
            "x.yaml:4:26: model.layers[0] (dropout): `p` must be in [0, 1) (got '1')");
  EXPECT_EQ(error_of("    - {type: linear, bias: maybe}\n"),
            "x.yaml:4:28: model.layers[0] (linear): `bias` must be true or false (got 'maybe')");
  EXPECT_EQ(error_of("    - {type: relu, name: a.b}\n"),
            "x.yaml:4:26: model.layers[0] (relu): `name` must be letters, digits and '_' (and `{i}` in a repeated "
            "group) (got 'a.b')");
  EXPECT_EQ(error_of("    - {type: relu, name: 'a_{i}'}\n"),
            "x.yaml:4:7: model.layers[0] (relu): its name 'a_{i}' holds {i}, the copy's index, but it is in no "
            "repeated group ({repeat: n, layers: [...]}); name it without {i}");
  EXPECT_EQ(error_of("    - {type: sequential}\n"),
            "x.yaml:4:7: model.layers[0] (sequential): needs `layers`: the list it runs in order, under its name");
  EXPECT_EQ(error_of("    - {type: residual}\n"),
            "x.yaml:4:7: model.layers[0] (residual): needs `layers`: the list whose output is added to the "
            "residual's input");
  EXPECT_EQ(error_of("    - {type: residual, layers: [{type: linear, size: 3}]}\n"),
            "x.yaml:4:48: model.layers[0].layers[0] (linear): unknown key `size`; linear takes type, name, "
            "out_features or bias");
  EXPECT_EQ(error_of("    - {out_features: 3}\n"),
            "x.yaml:4:7: model.layers[0]: has no `type`; one of conv2d, batchnorm, layernorm, relu, gelu, silu, tanh, "
            "leaky_relu, maxpool, avgpool, adaptive_avgpool, flatten, linear, dropout, residual, sequential, "
            "patch_embedding, class_token, position_embedding, self_attention or token, or a group of layers given n "
            "times: {repeat: n, layers: [...]}");
  EXPECT_EQ(error_of("    - {type: relu, type: gelu}\n"), "x.yaml:4:20: model.layers[0] (relu): `type` is given twice");
}

// ResNet-50's stages are blocks given n times: a group is its layers n times,
// nested groups and residual branches included, each copy read from one place.
TEST(LayerConfig, ARepeatGroupIsItsLayersGivenNTimes) {
  const ModelConfig model = model_of(
      "    - flatten\n"
      "    - repeat: 3\n"
      "      layers:\n"
      "        - {type: residual, layers: [{type: linear, out_features: 4, name: inner}, relu]}\n"
      "        - {repeat: 2, layers: [tanh]}\n"
      "    - linear\n");
  std::vector<LayerType> types;
  for (const auto& layer : model.layers) types.push_back(layer.type);
  EXPECT_EQ(types,
            (std::vector<LayerType>{LayerType::kFlatten, LayerType::kResidual, LayerType::kTanh, LayerType::kTanh,
                                    LayerType::kResidual, LayerType::kTanh, LayerType::kTanh, LayerType::kResidual,
                                    LayerType::kTanh, LayerType::kTanh, LayerType::kLinear}));
  // Every copy is the layer the file declares, at its place; names inside a residual stay in its branch.
  EXPECT_EQ(model.layers[4], model.layers[1]);
  EXPECT_EQ(model.layers[4].layers[0].name, "inner");
  EXPECT_EQ(model.layers[4].path, "model.layers[1].layers[0]");
  EXPECT_EQ(model.layers[9].path, "model.layers[1].layers[1].layers[0]");
  EXPECT_EQ(model.layers[4].mark.line, 7);
  EXPECT_EQ(model.layers[10].path, "model.layers[2]");
  // The dump spells the copies out, and reads back as the same network.
  const auto loaded = load_config_text("model:\n  layers: [{repeat: 2, layers: [relu]}, linear]\n", "x.yaml");
  const std::string dumped = dump_config(loaded.config);
  const std::size_t first = dumped.find("{type: relu}");
  ASSERT_NE(first, std::string::npos) << dumped;
  EXPECT_NE(dumped.find("{type: relu}", first + 1), std::string::npos) << dumped;
  EXPECT_EQ(dumped.find("repeat"), std::string::npos) << dumped;
  EXPECT_EQ(load_config_text(dumped, "dumped.yaml").config.model.layers, loaded.config.model.layers);
}

// torchvision's transformer names its blocks encoder_layer_0, encoder_layer_1, ...: `{i}` in a repeated
// layer's name is its copy's index, an inner group's copies counted by the inner group.
TEST(LayerConfig, ACopyIndexInARepeatedNameCountsTheCopies) {
  const ModelConfig model = model_of(
      "    - repeat: 2\n"
      "      layers:\n"
      "        - {type: sequential, name: 'block_{i}', layers: [{repeat: 2, layers: [{type: tanh, name: 't{i}'}]}]}\n"
      "    - linear\n");
  ASSERT_EQ(model.layers.size(), 3u);
  EXPECT_EQ(model.layers[0].name, "block_0");
  EXPECT_EQ(model.layers[1].name, "block_1");
  ASSERT_EQ(model.layers[1].layers.size(), 2u);
  EXPECT_EQ(model.layers[1].layers[0].name, "t0");
  EXPECT_EQ(model.layers[1].layers[1].name, "t1");
}

TEST(LayerConfig, ARepeatGroupsErrorsSayHowToWriteOne) {
  EXPECT_EQ(error_of("    - {repeat: 0, layers: [relu]}\n"),
            "x.yaml:4:16: model.layers[0] (repeat): `repeat` must be an integer in [1, 1000], the times its layers "
            "are given (got '0')");
  EXPECT_EQ(error_of("    - {repeat: twice, layers: [relu]}\n"),
            "x.yaml:4:16: model.layers[0] (repeat): `repeat` must be an integer in [1, 1000], the times its layers "
            "are given (got 'twice')");
  EXPECT_EQ(error_of("    - {repeat: , layers: [relu]}\n"),
            "x.yaml:4:16: model.layers[0] (repeat): `repeat` must be an integer in [1, 1000], the times its layers "
            "are given (got no value)");
  EXPECT_EQ(error_of("    - {repeat: 2, repeat: 3, layers: [relu]}\n"),
            "x.yaml:4:19: model.layers[0] (repeat): `repeat` is given twice");
  EXPECT_EQ(error_of("    - {repeat: 2}\n"),
            "x.yaml:4:7: model.layers[0] (repeat): needs `layers`: the list of layers given `repeat` times in a row");
  EXPECT_EQ(error_of("    - {repeat: 2, layers: []}\n"),
            "x.yaml:4:27: model.layers[0] (repeat): `layers` is empty; give the layers to repeat");
  EXPECT_EQ(error_of("    - {repeat: 2, layer: [relu]}\n"),
            "x.yaml:4:19: model.layers[0] (repeat): unknown key `layer` (did you mean `layers`?); a group of layers "
            "takes repeat and layers (a layer has a `type`)");
  EXPECT_EQ(error_of("    - {repeat: 2, layers: [relu, {type: tanh, name: t}]}\n"),
            "x.yaml:4:34: model.layers[0].layers[1] (tanh): is repeated 2 times, so it cannot be named 't': the "
            "copies would share the name (a checkpoint key); leave `name` out for counted names, or put {i} in "
            "it for the copy's index (encoder_layer_{i})");
  EXPECT_EQ(error_of("    - {type: residual, repeat: 2, layers: [relu]}\n"),
            "x.yaml:4:24: model.layers[0] (residual): `repeat` makes a group, which has no `type`: put the layer in "
            "one, {repeat: n, layers: [{type: residual, ...}]}");
  // Nested groups multiply; past 100000 layers the outer one is refused.
  EXPECT_EQ(error_of("    - {repeat: 1000, layers: [{repeat: 1000, layers: [relu]}]}\n"),
            "x.yaml:4:16: model.layers[0] (repeat): makes the network more than 100000 layers long; repeat fewer "
            "times");
}

TEST(LayerConfig, TheListImpliesItsNameAndAnotherNameIsRefused) {
  const auto implied = load_config_text("model:\n  layers: [flatten, linear]\n", "x.yaml");
  EXPECT_EQ(implied.config.model.name, ModelName::kLayers);
  EXPECT_EQ(load_config_text("", "x.yaml", {"model.layers=[flatten, linear]"}).config.model.name, ModelName::kLayers);
  try {
    load_config_text("model:\n  name: mlp\n  layers: [relu]\n", "x.yaml");
    ADD_FAILURE() << "layers with name: mlp was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "x.yaml:3:11: model.layers: declares a network, but model.name is `mlp`; leave model.name out "
              "(model.layers implies `layers`) or remove model.layers to use `mlp`");
  }
  EXPECT_THROW(load_config_text("model:\n  name: layers\n", "x.yaml"), ConfigError);
  EXPECT_THROW(load_config_text("model:\n  name: layers\n  layers: []\n", "x.yaml"), ConfigError);
}

TEST(LayerConfig, SetGivesAWholeListAndErrorsPointAtIt) {
  const auto loaded = load_config_text("model: {name: layers}\n", "x.yaml",
                                       {"model.layers=[flatten, {type: linear, out_features: 3}]"});
  ASSERT_EQ(loaded.config.model.layers.size(), 2u);
  try {
    load_config_text("model: {name: layers}\n", "x.yaml", {"model.layers=[{type: linear, out_features: -1}]"});
    ADD_FAILURE() << "out_features -1 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--set #1 (model.layers=[{type: linear, out_features: -1}]): model.layers[0] "
                                          "(linear): `out_features` must be >= 1",
                                          0),
              0u)
        << e.what();
  }
}

}  // namespace
}  // namespace gputrain::config
