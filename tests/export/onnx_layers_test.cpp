// Each layer family's ONNX nodes: the operator, its attributes and the
// weights it reads, named by layer and state-dict key; and the refusal of a
// layer ONNX cannot express. ONNX Runtime checks the numbers
// (tests/export/export_model_test.cpp).
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>

#include <algorithm>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/export/onnx_layers.h"
#include "gputrain/models/factory.h"

namespace gputrain::exporting {

using models::make_model;
using models::ModelShape;
namespace {

using Ints = std::vector<int64_t>;

config::ModelConfig declared(const std::string& layers, bool sync_batchnorm = false) {
  return config::load_config_text(std::string("model:\n  name: layers\n  sync_batchnorm: ") +
                                      (sync_batchnorm ? "true" : "false") + "\n  layers:\n" + layers,
                                  "x.yaml")
      .config.model;
}

struct Built {
  onnx::Graph graph;
  OnnxOutput output;
};

Built built(const config::ModelConfig& config, const ModelShape& shape) {
  torch::nn::Sequential model = make_model(config, shape);
  Built b;
  b.output = add_onnx_layers(model, shape.input_shape, b.graph, "input");
  return b;
}

const onnx::Node& node(const onnx::Graph& graph, const std::string& output) {
  const auto at =
      std::find_if(graph.nodes.begin(), graph.nodes.end(), [&](const onnx::Node& n) { return n.output == output; });
  if (at == graph.nodes.end()) throw std::runtime_error("no node " + output);
  return *at;
}

template <class T>
T attribute(const onnx::Node& node, const std::string& name) {
  for (const auto& a : node.attributes) {
    if (a.name == name) return std::get<T>(a.value);
  }
  throw std::runtime_error(node.output + " has no attribute " + name);
}

const onnx::Initializer& initializer(const onnx::Graph& graph, const std::string& name) {
  const auto at = std::find_if(graph.initializers.begin(), graph.initializers.end(),
                               [&](const onnx::Initializer& i) { return i.name == name; });
  if (at == graph.initializers.end()) throw std::runtime_error("no initializer " + name);
  return *at;
}

std::vector<std::string> ops(const onnx::Graph& graph) {
  std::vector<std::string> out;
  for (const auto& n : graph.nodes) out.push_back(n.op);
  return out;
}

// A convolution's or pool's window: kernel, strides, and pads (each axis's start, then each one's end).
void expect_window(const onnx::Node& n, const Ints& kernel, const Ints& strides, const Ints& pads) {
  EXPECT_EQ(attribute<Ints>(n, "kernel_shape"), kernel) << n.output;
  EXPECT_EQ(attribute<Ints>(n, "strides"), strides) << n.output;
  EXPECT_EQ(attribute<Ints>(n, "pads"), pads) << n.output;
}

TEST(OnnxLayers, ConvolutionKeepsStridePaddingGroupsAndItsWeights) {
  const Built b = built(declared("    - {type: conv2d, out_channels: 4, kernel: 3, stride: 2, padding: 1, groups: 2}\n"
                                 "    - {type: conv2d, out_channels: 4, kernel: 1, bias: false}\n"
                                 "    - flatten\n    - linear\n"),
                        {{2, 6, 6}, 3});
  const onnx::Node& conv = node(b.graph, "conv1");
  EXPECT_EQ(conv.inputs, (std::vector<std::string>{"input", "conv1.weight", "conv1.bias"}));
  EXPECT_EQ(conv.op, "Conv");
  expect_window(conv, {3, 3}, {2, 2}, {1, 1, 1, 1});
  EXPECT_EQ(attribute<int64_t>(conv, "group"), 2);
  EXPECT_EQ(initializer(b.graph, "conv1.weight").dims, (Ints{4, 1, 3, 3}));
  EXPECT_EQ(initializer(b.graph, "conv1.weight").values.size(), 36u);
  EXPECT_EQ(node(b.graph, "conv2").inputs, (std::vector<std::string>{"conv1", "conv2.weight"})) << "no bias";
  EXPECT_EQ(attribute<int64_t>(node(b.graph, "flatten1"), "axis"), 1);
  const onnx::Node& fc = node(b.graph, "fc1");
  EXPECT_EQ(fc.op, "Gemm");
  EXPECT_EQ(fc.inputs, (std::vector<std::string>{"flatten1", "fc1.weight", "fc1.bias"}));
  EXPECT_EQ(attribute<int64_t>(fc, "transB"), 1);
  EXPECT_EQ(b.output.value, "fc1");
  EXPECT_EQ(b.output.width, 3);
}

TEST(OnnxLayers, NormalisationsReadTheirRunningStatisticsAndEpsilon) {
  for (const bool sync : {false, true}) {
    const Built b = built(declared("    - {type: conv2d, out_channels: 3, kernel: 1}\n"
                                   "    - {type: batchnorm, eps: 0.001}\n    - {type: layernorm, eps: 0.0001}\n"
                                   "    - flatten\n    - {type: linear, out_features: 5}\n    - batchnorm\n"
                                   "    - linear\n",
                                   sync),
                          {{2, 4, 4}, 3});
    for (const char* name : {"bn1", "bn2"}) {
      const onnx::Node& bn = node(b.graph, name);
      EXPECT_EQ(bn.op, "BatchNormalization") << name;
      const std::string n = name;
      EXPECT_EQ(bn.inputs, (std::vector<std::string>{bn.inputs[0], n + ".weight", n + ".bias", n + ".running_mean",
                                                     n + ".running_var"}));
    }
    EXPECT_FLOAT_EQ(attribute<float>(node(b.graph, "bn1"), "epsilon"), 0.001f);
    EXPECT_EQ(initializer(b.graph, "bn2.running_var").dims, (Ints{5}));
    const onnx::Node& ln = node(b.graph, "ln1");
    EXPECT_EQ(ln.op, "LayerNormalization");
    EXPECT_EQ(attribute<int64_t>(ln, "axis"), -3) << "over C, H and W";
    EXPECT_FLOAT_EQ(attribute<float>(ln, "epsilon"), 0.0001f);
    EXPECT_EQ(initializer(b.graph, "ln1.weight").dims, (Ints{3, 4, 4}));
  }
}

TEST(OnnxLayers, ActivationsAndDropoutInTheirEvaluationForm) {
  const Built b = built(declared("    - {type: linear, out_features: 4}\n    - relu\n    - gelu\n    - silu\n"
                                 "    - tanh\n    - {type: leaky_relu, negative_slope: 0.2}\n"
                                 "    - {type: dropout, p: 0.5}\n    - linear\n"),
                        {{3}, 2});
  EXPECT_EQ(ops(b.graph), (std::vector<std::string>{"Gemm", "Relu", "Div", "Erf", "Add", "Mul", "Mul", "Sigmoid", "Mul",
                                                    "Tanh", "LeakyRelu", "Identity", "Gemm"}));
  EXPECT_EQ(node(b.graph, "gelu1").inputs.front(), "relu1");
  EXPECT_EQ(node(b.graph, "silu1").inputs, (std::vector<std::string>{"gelu1", "silu1/sigmoid"}));
  EXPECT_FLOAT_EQ(attribute<float>(node(b.graph, "leaky_relu1"), "alpha"), 0.2f);
  EXPECT_EQ(node(b.graph, "drop1").op, "Identity");
  EXPECT_EQ(initializer(b.graph, node(b.graph, "gelu1/scaled").inputs[1]).values,
            (std::vector<float>{std::sqrt(2.0f)}));
}

TEST(OnnxLayers, PoolsKeepTheirWindowsAndAdaptivePoolingBecomesAnEqualWindow) {
  const std::string pools =
      "    - {type: maxpool, kernel: 3, stride: 1, padding: 1}\n"
      "    - {type: avgpool, kernel: 2, padding: 1}\n"
      "    - {type: adaptive_avgpool, output_size: 2}\n    - flatten\n    - linear\n";
  const Built b = built(declared(pools), {{1, 7, 7}, 2});
  const onnx::Node& max = node(b.graph, "pool1");
  EXPECT_EQ(max.op, "MaxPool");
  expect_window(max, {3, 3}, {1, 1}, {1, 1, 1, 1});
  const onnx::Node& avg = node(b.graph, "avgpool1");
  EXPECT_EQ(avg.op, "AveragePool");
  EXPECT_EQ(attribute<Ints>(avg, "strides"), (Ints{2, 2})) << "stride defaults to the kernel";
  EXPECT_EQ(attribute<int64_t>(avg, "count_include_pad"), 1) << "torch's default";
  const onnx::Node& adaptive = node(b.graph, "gap1");  // 7x7 -> avgpool -> 4x4 -> 2x2
  EXPECT_EQ(adaptive.op, "AveragePool");
  EXPECT_EQ(attribute<Ints>(adaptive, "kernel_shape"), (Ints{2, 2}));
  EXPECT_EQ(attribute<Ints>(adaptive, "strides"), (Ints{2, 2}));
}

TEST(OnnxLayers, ResidualsAddTheirBranchToTheInputOrTheShortcut) {
  const Built b = built(declared("    - type: residual\n      layers: [{type: conv2d, out_channels: 2, kernel: 3, "
                                 "padding: 1}, relu]\n"
                                 "    - type: residual\n      layers: [{type: conv2d, out_channels: 4, kernel: 1}]\n"
                                 "      shortcut: [{type: conv2d, out_channels: 4, kernel: 1, name: proj}]\n"
                                 "    - flatten\n    - linear\n"),
                        {{2, 3, 3}, 2});
  EXPECT_EQ(node(b.graph, "res1.layers.conv1").inputs[1], "res1.layers.conv1.weight");
  EXPECT_EQ(node(b.graph, "res1").op, "Add");
  EXPECT_EQ(node(b.graph, "res1").inputs, (std::vector<std::string>{"res1.layers.relu1", "input"}));
  EXPECT_EQ(node(b.graph, "res2.shortcut.proj").inputs[0], "res1");
  EXPECT_EQ(node(b.graph, "res2").inputs, (std::vector<std::string>{"res2.layers.conv2", "res2.shortcut.proj"}));
}

TEST(OnnxLayers, BuiltInNetworksMapLayerByLayer) {
  const ModelShape images{{1, 28, 28}, 10};
  const Built cnn = built(config::load_config_text("model: {name: cifar10_cnn}\n", "x.yaml").config.model, images);
  EXPECT_EQ(ops(cnn.graph), (std::vector<std::string>{"Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Flatten",
                                                      "Gemm", "Relu", "Gemm", "Relu", "Gemm"}));
  const Built mlp =
      built(config::load_config_text("model: {name: mlp, hidden: [8], activation: tanh, dropout: 0.2}\n", "x.yaml")
                .config.model,
            images);
  EXPECT_EQ(ops(mlp.graph), (std::vector<std::string>{"Flatten", "Gemm", "Tanh", "Identity", "Gemm"}));
  EXPECT_EQ(mlp.output.width, 10);
}

// What add_onnx_layers refused `model` with: a UserError (exit code 2), whose message is returned.
std::string refusal(torch::nn::Sequential model, const std::vector<int64_t>& sample_shape) {
  onnx::Graph graph;
  try {
    add_onnx_layers(model, sample_shape, graph, "input");
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "exported";
  return "";
}

// A layer ONNX cannot express is refused by its name: exit code 2, not a wrong model.
TEST(OnnxLayers, RefusesALayerWithoutAnEqualWindowOrAMappingByName) {
  const std::string unequal =
      refusal(make_model(declared("    - {type: adaptive_avgpool, output_size: 3}\n    - flatten\n    - linear\n"),
                         {{1, 7, 7}, 2}),
              {1, 7, 7});
  EXPECT_NE(unequal.find("layer gap1 (AdaptiveAvgPool2d(output_size=[3, 3])) cannot be written as ONNX: its 7x7 "
                         "input does not divide into 3x3 equal windows"),
            std::string::npos)
      << unequal;
  torch::nn::Sequential foreign;
  foreign->push_back("soft", torch::nn::Softmax(1));
  const std::string unknown = refusal(foreign, {4});
  EXPECT_NE(unknown.find("layer soft (Softmax(dim=1)) cannot be written as ONNX: gputrain has no ONNX mapping for it"),
            std::string::npos)
      << unknown;
}

TEST(OnnxLayers, RestoresTheModelsTrainingMode) {
  torch::nn::Sequential model = make_model(declared("    - batchnorm\n    - linear\n"), {{3}, 2});
  onnx::Graph graph;
  add_onnx_layers(model, {3}, graph, "input");
  EXPECT_TRUE(model->is_training());
}

}  // namespace
}  // namespace gputrain::exporting
