// model.layers built: shapes inferred from the data set, errors about shapes
// on the layer at fault, the built-ins' parameters and names reproduced, and
// residual branches that trace, clone and replicate like any layer.
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/parallel/data_parallel.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/models/factory.h"
#include "support/paths.h"

namespace gputrain::models {
namespace {

config::ModelConfig declared(const std::string& layers) {
  return config::load_config_text("model:\n  name: layers\n  layers:\n" + layers, "x.yaml").config.model;
}

std::string shape_error(const std::string& layers, const ModelShape& shape) {
  try {
    make_model(declared(layers), shape);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "built:\n" << layers;
  return "";
}

config::ModelConfig shipped(const std::string& name) {
  const auto path = std::filesystem::path(testing::kSourceDir) / "configs" / name;
  return config::load_config(path.string()).config.model;
}

// Name and shape of every parameter and buffer: what a checkpoint holds.
std::vector<std::pair<std::string, std::vector<int64_t>>> state_of(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> state;
  for (const auto& entry : model.named_parameters()) state.emplace_back(entry.key(), entry.value().sizes().vec());
  for (const auto& entry : model.named_buffers()) state.emplace_back(entry.key(), entry.value().sizes().vec());
  return state;
}

TEST(DeclaredModel, InfersInputSizesAndEndsWithTheDataSetsOutputs) {
  auto model = make_model(declared("    - {type: conv2d, out_channels: 8, kernel: 3, padding: 1}\n"
                                   "    - {type: batchnorm}\n    - gelu\n    - maxpool\n"
                                   "    - {type: adaptive_avgpool, output_size: 2}\n    - flatten\n"
                                   "    - {type: linear, out_features: 16}\n    - {type: layernorm}\n    - silu\n"
                                   "    - {type: dropout, p: 0.1}\n    - linear\n"),
                          {{3, 12, 12}, 7});
  EXPECT_EQ(model->named_children().keys(),
            (std::vector<std::string>{"conv1", "bn1", "gelu1", "pool1", "gap1", "flatten1", "fc1", "ln1", "silu1",
                                      "drop1", "fc2"}));
  EXPECT_EQ(model->named_parameters()["fc1.weight"].sizes().vec(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(model->forward(torch::randn({5, 3, 12, 12})).sizes().vec(), (std::vector<int64_t>{5, 7}));
}

TEST(DeclaredModel, ShapeErrorsNameTheLayerThatDoesNotFit) {
  EXPECT_EQ(shape_error("    - {type: linear, out_features: 4}\n    - linear\n", {{1, 28, 28}, 10}),
            "x.yaml:4:7: model.layers[0] (linear): gets 1x28x28 images (CxHxW); put {type: flatten} before it to "
            "make them 784 features");
  EXPECT_EQ(
      shape_error("    - flatten\n    - {type: conv2d, out_channels: 4, kernel: 3}\n    - linear\n", {{1, 28, 28}, 10}),
      "x.yaml:5:7: model.layers[1] (conv2d): needs images (CxHxW) but gets 784 features; it belongs before the "
      "flatten");
  EXPECT_EQ(
      shape_error("    - {type: conv2d, out_channels: 4, kernel: 9}\n    - flatten\n    - linear\n", {{1, 6, 6}, 10}),
      "x.yaml:4:7: model.layers[0] (conv2d): kernel 9 does not fit its 6x6 input padded by 0");
  EXPECT_EQ(shape_error("    - {type: conv2d, out_channels: 4, kernel: 3, groups: 2}\n    - flatten\n    - linear\n",
                        {{3, 8, 8}, 10}),
            "x.yaml:4:7: model.layers[0] (conv2d): groups 2 must divide its input channels (3) and out_channels (4)");
  EXPECT_EQ(shape_error("    - flatten\n    - linear\n    - linear\n", {{1, 4, 4}, 10}),
            "x.yaml:5:7: model.layers[1] (linear): needs out_features; only the network's last layer may leave it "
            "out (it then gives the data set's classes or targets)");
  EXPECT_EQ(shape_error("    - {type: conv2d, out_channels: 4, kernel: 3}\n", {{1, 4, 4}, 10}),
            "x.yaml:4:7: model.layers[0] (conv2d): the network ends with 4x2x2 images (CxHxW) per sample, but the "
            "data set needs 10 outputs (its classes or targets); end with a linear layer (out_features may be left "
            "out)");
  EXPECT_EQ(shape_error("    - {type: residual, layers: [{type: conv2d, out_channels: 8, kernel: 3, padding: 1}]}\n"
                        "    - flatten\n    - linear\n",
                        {{4, 6, 6}, 10}),
            "x.yaml:4:7: model.layers[0] (residual): its layers give 8x6x6 images (CxHxW) but its input is 4x6x6 "
            "images (CxHxW); they are added, so add a `shortcut` list that gives the same shape (e.g. a conv2d with "
            "kernel 1)");
  EXPECT_EQ(shape_error("    - {name: a, type: relu}\n    - {name: a, type: tanh}\n    - flatten\n    - linear\n",
                        {{1, 2, 2}, 3}),
            "x.yaml:5:7: model.layers[1] (tanh): the name 'a' is taken by an earlier layer of this list; layer names "
            "are checkpoint keys and must differ");
}

// Issue 37 (weak): a layer too large to make got LibTorch's bare error,
// naming no layer; `gputrain model` exited 1.
TEST(DeclaredModel, ALayerTooLargeToMakeIsNamed) {
  const std::string message = shape_error(
      "    - flatten\n    - {type: linear, out_features: 4611686018427387904}\n    - linear\n", {{1, 4, 4}, 10});
  EXPECT_EQ(message.rfind("x.yaml:5:7: model.layers[1] (linear): LibTorch cannot make its weights (", 0), 0u)
      << message;
  EXPECT_NE(message.find("); make the layer smaller"), std::string::npos) << message;
}

// configs/cifar10_layers.yaml and fashion_mnist_layers.yaml declare the
// built-in models: same parameters under the same names, so checkpoints of
// either load into the other, and the same initial weights from one seed.
TEST(DeclaredModel, TheBuiltInsAreExpressibleWithTheSameCheckpointKeys) {
  const std::vector<std::tuple<std::string, std::string, ModelShape>> pairs{
      {"cifar10.yaml", "cifar10_layers.yaml", {{3, 32, 32}, 10}},
      {"fashion_mnist.yaml", "fashion_mnist_layers.yaml", {{1, 28, 28}, 10}}};
  for (const auto& [builtin_file, declared_file, shape] : pairs) {
    torch::manual_seed(3);
    auto builtin = make_model(shipped(builtin_file), shape);
    torch::manual_seed(3);
    auto twin = make_model(shipped(declared_file), shape);
    EXPECT_EQ(state_of(*twin), state_of(*builtin)) << declared_file;
    EXPECT_EQ(parameter_count(*twin), parameter_count(*builtin)) << declared_file;
    EXPECT_EQ(twin->named_children().keys(), builtin->named_children().keys()) << declared_file;
    for (const auto& entry : builtin->named_parameters()) {
      EXPECT_TRUE(torch::equal(entry.value(), twin->named_parameters()[entry.key()])) << entry.key();
    }
  }
}

// Each shipped config that declares its layers builds for its data set's samples.
TEST(DeclaredModel, EveryShippedNetworkBuildsForItsDataSet) {
  int seen = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(testing::kSourceDir) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    const config::ExperimentConfig c = config::load_config(entry.path().string()).config;
    if (c.model.name != config::ModelName::kLayers) continue;
    ++seen;
    // An image folder's networks (torchvision's) take colour images; 32x32 keeps ViT-B/16's patches whole.
    const ModelShape shape =
        c.data.dataset == config::DatasetName::kCifar10 || c.data.dataset == config::DatasetName::kImageFolder
            ? ModelShape{{3, 32, 32}, 10}
            : ModelShape{{1, 28, 28}, 10};
    auto model = make_model(c.model, shape);
    model->eval();
    EXPECT_EQ(model->forward(torch::zeros({2, shape.input_shape[0], shape.input_shape[1], shape.input_shape[2]}))
                  .sizes()
                  .vec(),
              (std::vector<int64_t>{2, 10}))
        << entry.path();
  }
  EXPECT_GE(seen, 4);
}

// Issue 41: configs/resnet18_folder.yaml and resnet50_folder.yaml declare
// torchvision's resnet18 and resnet50. The figures are torchvision 0.26's
// (torch 2.11) for resnet18(num_classes=1000) and resnet50(...): the sum of
// p.numel() over parameters(), how many tensors parameters() holds, and the
// multiply-adds forward hooks on every Conv2d and Linear count (weight.numel()
// x output pixels, as trace_layers does) for a 3x32x32 sample. At 224x224,
// where every feature map's side is 7 times larger, the hooks count
// 1,814,073,344 and 4,089,184,256, what `gputrain model` prints for the
// configs; a 224x224 forward pass takes seconds on a CPU, a 32x32 one 1/49 of that.
TEST(DeclaredModel, TheResnetConfigsHaveTorchvisionsSizes) {
  struct Expected {
    const char* file;
    int64_t parameters, tensors, macs_at_32;
  };
  for (const Expected& net : {Expected{"resnet18_folder.yaml", 11'689'512, 62, 37'523'456},
                              Expected{"resnet50_folder.yaml", 25'557'032, 161, 85'458'944}}) {
    auto model = make_model(shipped(net.file), {{3, 224, 224}, 1000});
    EXPECT_EQ(parameter_count(*model), net.parameters) << net.file;
    EXPECT_EQ(static_cast<int64_t>(model->parameters().size()), net.tensors) << net.file;
    EXPECT_EQ(forward_macs(trace_layers(model, {3, 32, 32})), net.macs_at_32) << net.file;
  }
}

// torchvision 0.26's state-dict keys of resnet18/50 and vit_b_16, as
// list(torchvision.models.<net>().state_dict()) prints them, generated.
std::vector<std::string> torchvision_keys(const std::string& net) {
  std::vector<std::string> keys;
  const auto batchnorm = [&](const std::string& name) {
    for (const char* part : {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}) {
      keys.push_back(name + "." + part);
    }
  };
  if (net == "vit_b_16") {
    keys = {"class_token", "conv_proj.weight", "conv_proj.bias", "encoder.pos_embedding"};
    for (int i = 0; i < 12; ++i) {
      const std::string block = "encoder.layers.encoder_layer_" + std::to_string(i) + ".";
      for (const char* part :
           {"ln_1.weight", "ln_1.bias", "self_attention.in_proj_weight", "self_attention.in_proj_bias",
            "self_attention.out_proj.weight", "self_attention.out_proj.bias", "ln_2.weight", "ln_2.bias",
            "mlp.0.weight", "mlp.0.bias", "mlp.3.weight", "mlp.3.bias"}) {
        keys.push_back(block + part);
      }
    }
    keys.insert(keys.end(), {"encoder.ln.weight", "encoder.ln.bias", "heads.head.weight", "heads.head.bias"});
    return keys;
  }
  const bool bottleneck = net == "resnet50";
  const std::vector<int> blocks = bottleneck ? std::vector<int>{3, 4, 6, 3} : std::vector<int>{2, 2, 2, 2};
  keys.push_back("conv1.weight");
  batchnorm("bn1");
  for (int stage = 0; stage < 4; ++stage) {
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string block = fmt::format("layer{}.{}.", stage + 1, b);
      for (int conv = 1; conv <= (bottleneck ? 3 : 2); ++conv) {
        keys.push_back(block + fmt::format("conv{}.weight", conv));
        batchnorm(block + fmt::format("bn{}", conv));
      }
      if (b == 0 && (stage > 0 || bottleneck)) {
        keys.push_back(block + "downsample.0.weight");
        batchnorm(block + "downsample.1");
      }
    }
  }
  keys.insert(keys.end(), {"fc.weight", "fc.bias"});
  return keys;
}

// The state dict's keys: modules in pre-order, each one's parameters, then its buffers (torch's order).
std::vector<std::string> state_dict_keys(const torch::nn::Module& model) {
  std::vector<std::string> keys;
  for (const auto& module : model.named_modules()) {
    const std::string prefix = module.key().empty() ? "" : module.key() + ".";
    for (const auto& p : module.value()->named_parameters(/*recurse=*/false)) keys.push_back(prefix + p.key());
    for (const auto& b : module.value()->named_buffers(/*recurse=*/false)) keys.push_back(prefix + b.key());
  }
  return keys;
}

// Issue 58: the shipped torchvision networks name every tensor as torchvision
// does, in its order, so its state dicts load with model.init_strict and
// gputrain's load into it (torchvision_test.cpp checks both with torchvision).
TEST(DeclaredModel, TheTorchvisionConfigsHaveTorchvisionsNamesInItsOrder) {
  for (const auto& [file, net] :
       {std::pair{"resnet18_folder.yaml", "resnet18"}, std::pair{"resnet50_folder.yaml", "resnet50"},
        std::pair{"vit_b_16_folder.yaml", "vit_b_16"}}) {
    auto model = make_model(shipped(file), {{3, 224, 224}, 1000});
    EXPECT_EQ(state_dict_keys(*model), torchvision_keys(net)) << file;
  }
}

// torchvision's vit_b_16(num_classes=1000): 86,567,656 parameters in 152 tensors.
TEST(DeclaredModel, TheVitConfigHasTorchvisionsSizeAndItsTokensShapes) {
  auto model = make_model(shipped("vit_b_16_folder.yaml"), {{3, 224, 224}, 1000});
  EXPECT_EQ(parameter_count(*model), 86'567'656);
  EXPECT_EQ(model->parameters().size(), 152u);
  // On 32x32 images (4 patches: a pass in milliseconds), whose position embedding is [1, 5, 768].
  auto small = make_model(shipped("vit_b_16_folder.yaml"), {{3, 32, 32}, 1000});
  const auto rows = trace_layers(small, {3, 32, 32});
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "conv_proj");
  EXPECT_EQ(rows[0].output_shape, (std::vector<int64_t>{4, 768}));
  EXPECT_EQ(rows[1].name, "class_token");
  EXPECT_EQ(rows[1].output_shape, (std::vector<int64_t>{5, 768}));
  EXPECT_EQ(rows[1].parameters, 768);
  EXPECT_EQ(rows.back().output_shape, (std::vector<int64_t>{1000}));
}

// Each token layer checks what it is given, and says so at the layer's place in the file.
TEST(DeclaredModel, TokenLayersShapeErrorsNameTheLayer) {
  const ModelShape images{{3, 32, 32}, 4};
  EXPECT_EQ(
      shape_error("    - {type: patch_embedding, patch: 5, width: 8}\n    - {type: token}\n    - linear\n", images),
      "x.yaml:4:7: model.layers[0] (patch_embedding): its 32x32 images do not divide into 5x5 patches; choose a "
      "patch that divides both sides, or resize the images (data.image_size, data.center_crop)");
  EXPECT_EQ(shape_error("    - class_token\n    - linear\n", images),
            "x.yaml:4:7: model.layers[0] (class_token): needs tokens [T, D] but gets 3x32x32 images (CxHxW); a "
            "patch_embedding makes tokens of images");
  EXPECT_EQ(shape_error("    - {type: patch_embedding, patch: 8, width: 10}\n    - {type: self_attention, heads: 4}\n"
                        "    - token\n    - linear\n",
                        images),
            "x.yaml:5:7: model.layers[1] (self_attention): 4 heads do not divide its tokens' width 10; choose heads "
            "that divide it");
  EXPECT_EQ(shape_error("    - {type: patch_embedding, patch: 16, width: 8}\n    - {type: token, index: 4}\n"
                        "    - linear\n",
                        images),
            "x.yaml:5:7: model.layers[1] (token): index 4 is past its 4 tokens");
}

// A small transformer: inline residuals and sequentials name their layers as
// torchvision's, the class token's and position embedding's tensors go by
// the layer's name in the list holding it, and clones and replicas keep all of it.
TEST(DeclaredModel, InlineResidualsAndHoistedTensorsNameAsTorchvisionAndClone) {
  const std::string layers =
      "    - {type: patch_embedding, name: conv_proj, patch: 4, width: 8}\n"
      "    - {type: class_token, name: class_token}\n"
      "    - type: sequential\n"
      "      name: encoder\n"
      "      layers:\n"
      "        - {type: position_embedding, name: pos_embedding}\n"
      "        - repeat: 2\n"
      "          layers:\n"
      "            - type: sequential\n"
      "              name: block_{i}\n"
      "              layers:\n"
      "                - {type: residual, inline: true, layers: [{type: layernorm, name: ln_1, last_dim: true}, "
      "{type: self_attention, name: attention, heads: 2}]}\n"
      "                - {type: residual, inline: true, layers: [{type: sequential, name: mlp, layers: "
      "[{type: linear, out_features: 16}, gelu, {type: linear, out_features: 8}]}]}\n"
      "    - {type: token, index: 0}\n"
      "    - {type: linear, name: head}\n";
  auto model = make_model(declared(layers), {{3, 8, 8}, 5});
  const std::vector<std::string> expected{"class_token",
                                          "conv_proj.weight",
                                          "conv_proj.bias",
                                          "encoder.pos_embedding",
                                          "encoder.block_0.ln_1.weight",
                                          "encoder.block_0.ln_1.bias",
                                          "encoder.block_0.attention.in_proj_weight",
                                          "encoder.block_0.attention.in_proj_bias",
                                          "encoder.block_0.attention.out_proj.weight",
                                          "encoder.block_0.attention.out_proj.bias",
                                          "encoder.block_0.mlp.0.weight",
                                          "encoder.block_0.mlp.0.bias",
                                          "encoder.block_0.mlp.2.weight",
                                          "encoder.block_0.mlp.2.bias"};
  const auto keys = state_dict_keys(*model);
  ASSERT_EQ(keys.size(), 4u + 2u * 10u + 2u);
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(expected.size())),
            expected);
  EXPECT_EQ(keys[14], "encoder.block_1.ln_1.weight");
  EXPECT_EQ(model->named_parameters()["encoder.pos_embedding"].sizes(), (std::vector<int64_t>{1, 5, 8}));
  auto copy = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(state_dict_keys(*copy), keys);
  torch::NoGradGuard no_grad;
  model->eval();
  copy->eval();
  const torch::Tensor x = torch::randn({3, 3, 8, 8});
  const torch::Tensor out = model->forward(x);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(torch::allclose(out, copy->forward(x)));
  // The copy's tensors are its own: moving the original's class token moves only the original's output.
  model->named_parameters()["class_token"].add_(1.0);
  EXPECT_FALSE(torch::allclose(model->forward(x), copy->forward(x)));
  const auto replicas = torch::nn::parallel::replicate(model, {torch::Device(torch::kCPU), torch::Device(torch::kCPU)});
  ASSERT_EQ(replicas.size(), 2u);
  const std::shared_ptr<torch::nn::SequentialImpl> replica = replicas[1].ptr();
  EXPECT_TRUE(torch::allclose(replica->forward(x), model->forward(x)));
}

const char* const kResidualNet =
    "    - {type: conv2d, out_channels: 4, kernel: 3, padding: 1, bias: false}\n"
    "    - batchnorm\n"
    "    - type: residual\n"
    "      layers: [{type: conv2d, out_channels: 8, kernel: 3, stride: 2, padding: 1}, relu]\n"
    "      shortcut: [{type: conv2d, out_channels: 8, kernel: 1, stride: 2}]\n"
    "    - {type: residual, layers: [{type: conv2d, out_channels: 8, kernel: 3, padding: 1}]}\n"
    "    - flatten\n"
    "    - linear\n";

TEST(DeclaredModel, ResidualBranchesNestUnderTheirNames) {
  auto model = make_model(declared(kResidualNet), {{2, 6, 6}, 5});
  const auto names = model->named_parameters().keys();
  for (const char* name : {"conv1.weight", "bn1.weight", "res1.layers.conv2.weight", "res1.shortcut.conv3.bias",
                           "res2.layers.conv4.weight", "fc1.weight"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  // res1 adds its branch to its 1x1-convolved input; res2 to its input itself.
  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor x = torch::randn({3, 2, 6, 6});
  const torch::Tensor stem =
      model[1]->as<torch::nn::BatchNorm2dImpl>()->forward(model[0]->as<torch::nn::Conv2dImpl>()->forward(x));
  auto named = model->named_modules();
  const auto branch = [&](const std::string& name, const torch::Tensor& in) {
    return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(named[name])->forward(in);
  };
  const torch::Tensor after1 = branch("res1.layers", stem) + branch("res1.shortcut", stem);
  const torch::Tensor after2 = branch("res2.layers", after1) + after1;
  const torch::Tensor expected = model[5]->as<torch::nn::LinearImpl>()->forward(after2.flatten(1));
  EXPECT_TRUE(torch::allclose(model->forward(x), expected));
}

TEST(DeclaredModel, TracesShapesParametersAndFlopsThroughBranches) {
  auto model = make_model(declared(kResidualNet), {{2, 6, 6}, 5});
  const auto rows = trace_layers(model, {2, 6, 6});
  std::vector<std::string> names;
  for (const auto& row : rows) names.push_back(row.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1", "bn1", "res1", "res1.layers.conv2", "res1.layers.relu1",
                                             "res1.shortcut.conv3", "res2", "res2.layers.conv4", "flatten1", "fc1"}));
  EXPECT_EQ(rows[2].output_shape, (std::vector<int64_t>{8, 3, 3}));
  EXPECT_EQ(rows[2].depth, 0);
  EXPECT_EQ(rows[3].depth, 1);
  // conv1 72 weights x 36 pixels; conv2 288 x 9; conv3 32 x 9; conv4 576 x 9; fc1 360.
  EXPECT_EQ(rows[0].macs, 72 * 36);
  EXPECT_EQ(rows[2].macs, 288 * 9 + 32 * 9);
  EXPECT_EQ(forward_macs(rows), 72 * 36 + 288 * 9 + 32 * 9 + 576 * 9 + 360);
  int64_t top_parameters = 0;
  for (const auto& row : rows) top_parameters += row.depth == 0 ? row.parameters : 0;
  EXPECT_EQ(top_parameters, parameter_count(*model));
  const std::string table = layer_table(rows);
  EXPECT_NE(table.find("  res1.layers.conv2"), std::string::npos) << table;
  EXPECT_NE(table.find("forward FLOPs per sample: 22,032"), std::string::npos) << table;
}

TEST(DeclaredModel, ClonesAndReplicasKeepTheBranchesAndTheirWeights) {
  auto model = make_model(declared(kResidualNet), {{2, 6, 6}, 5});
  auto copy = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->named_parameters().keys(), model->named_parameters().keys());
  for (const auto& entry : model->named_parameters()) {
    EXPECT_TRUE(torch::equal(entry.value(), copy->named_parameters()[entry.key()])) << entry.key();
    EXPECT_NE(entry.value().data_ptr(), copy->named_parameters()[entry.key()].data_ptr()) << entry.key();
  }
  torch::NoGradGuard no_grad;
  model->eval();
  copy->eval();
  const torch::Tensor x = torch::randn({2, 2, 6, 6});
  EXPECT_TRUE(torch::equal(model->forward(x), copy->forward(x)));
  const auto replicas = torch::nn::parallel::replicate(model, {torch::Device(torch::kCPU), torch::Device(torch::kCPU)});
  EXPECT_EQ(replicas.size(), 2u);
}

// model.sync_batchnorm's layer in one process (its statistics summed over one
// rank): torch's batchnorm, forward and backward, under the same checkpoint keys.
// Two ranks against one process: Ddp.SyncBatchnormOnTwoGlooRanksTrainsAsOneProcess.
TEST(DeclaredModel, SyncBatchnormSummedOverOneProcessIsBatchnorm) {
  const std::string layers =
      "  - {type: conv2d, out_channels: 4, kernel: 3, padding: 1}\n  - batchnorm\n  - relu\n"
      "  - flatten\n  - {type: linear, out_features: 6}\n  - batchnorm\n  - linear\n";
  config::ModelConfig config = declared(layers);
  torch::manual_seed(5);
  torch::nn::Sequential plain = make_model(config, {{3, 5, 5}, 3});
  config.sync_batchnorm = true;
  torch::manual_seed(5);
  torch::nn::Sequential synced = make_model(config, {{3, 5, 5}, 3});
  EXPECT_EQ(state_of(*synced), state_of(*plain));
  EXPECT_EQ(share_batch_statistics(plain, [](torch::Tensor&) {}), 0);
  int64_t sums = 0;
  EXPECT_EQ(share_batch_statistics(synced, [&sums](torch::Tensor&) { ++sums; }), 2);

  for (int step = 0; step < 3; ++step) {
    const torch::Tensor x = torch::randn({7, 3, 5, 5});
    std::vector<torch::Tensor> inputs{x.clone().requires_grad_(), x.clone().requires_grad_()};
    std::vector<torch::Tensor> outputs;
    for (auto* model : {&plain, &synced}) {
      torch::Tensor& input = inputs[outputs.size()];
      outputs.push_back((*model)->forward(input));
      outputs.back().square().sum().backward();
    }
    EXPECT_TRUE(torch::allclose(outputs[1], outputs[0], 1e-4, 1e-5)) << step;
    EXPECT_TRUE(torch::allclose(inputs[1].grad(), inputs[0].grad(), 1e-3, 1e-5)) << step;
  }
  EXPECT_EQ(sums, 3 * 2 * 3);  // each layer's count and mean, its M2, then their gradient, every step
  const auto expected = plain->named_parameters(), actual = synced->named_parameters();
  for (const auto& p : expected)
    EXPECT_TRUE(torch::allclose(actual[p.key()].grad(), p.value().grad(), 1e-3, 1e-4)) << p.key();
  const auto buffers = plain->named_buffers(), synced_buffers = synced->named_buffers();
  for (const auto& b : buffers) EXPECT_TRUE(torch::allclose(synced_buffers[b.key()], b.value(), 1e-5, 1e-6)) << b.key();

  synced->eval();
  plain->eval();
  const torch::Tensor x = torch::randn({2, 3, 5, 5});
  EXPECT_TRUE(torch::allclose(synced->forward(x), plain->forward(x), 1e-5, 1e-6));
  EXPECT_EQ(sums, 18);  // evaluation uses the running statistics: nothing to sum
}

// Sums across the ranks of threads of this process, as ddp's all-reduce sums across processes.
class ThreadSum {
 public:
  explicit ThreadSum(int ranks) : ranks_(ranks) {}
  void operator()(torch::Tensor& values) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t round = round_;
    total_ = arrived_ == 0 ? values.clone() : total_ + values;
    if (++arrived_ == ranks_) {
      result_ = total_;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return round_ != round; });
    }
    values.copy_(result_);
  }

 private:
  int ranks_;
  std::mutex mutex_;
  std::condition_variable done_;
  int arrived_ = 0;
  int64_t round_ = 0;
  torch::Tensor total_, result_;
};

// Values far from zero with a small spread, 1e4 + N(0, 1e-2), on 2 ranks whose rows differ in count and
// mean: the combined mean and variance are float64's of the same float32 values. Sums of x and x^2 in
// float32 (x^2 ~ 1e8, spaced 8 apart) lose such a variance entirely.
TEST(DeclaredModel, SyncBatchnormCombinesRanksStatisticsAsFloat64Does) {
  config::ModelConfig config = declared("  - {type: batchnorm, momentum: 0.999}\n  - linear\n");
  config.sync_batchnorm = true;
  torch::manual_seed(2);
  const std::vector<torch::Tensor> rows{1e4 + 1e-2 * torch::randn({64, 3}), 1e4 + 0.02 + 1e-2 * torch::randn({48, 3})};
  std::vector<torch::nn::Sequential> ranks{make_model(config, {{3}, 2}), make_model(config, {{3}, 2})};
  ThreadSum sum(2);
  for (auto& model : ranks) share_batch_statistics(model, [&sum](torch::Tensor& values) { sum(values); });
  std::thread other([&] { ranks[1]->forward(rows[1]); });
  ranks[0]->forward(rows[0]);
  other.join();

  const torch::Tensor all = torch::cat(rows).to(torch::kFloat64);
  const torch::Tensor mean = all.mean(0), var = all.var(0, /*unbiased=*/true);
  for (auto& model : ranks) {
    const auto buffers = model->named_buffers();
    // momentum 0.999: running = 0.001 x (0 or 1) + 0.999 x the batch's statistic
    const torch::Tensor got_mean = buffers["bn1.running_mean"].to(torch::kFloat64) / 0.999;
    const torch::Tensor got_var = (buffers["bn1.running_var"].to(torch::kFloat64) - 0.001) / 0.999;
    EXPECT_LT((got_mean - mean).abs().max().item<double>(), 2e-3) << got_mean << mean;
    EXPECT_LT(((got_var - var) / var).abs().max().item<double>(), 1e-3) << got_var << var;
  }
}

}  // namespace
}  // namespace gputrain::models
