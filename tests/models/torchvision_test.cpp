// Issue 58: the shipped torchvision networks carry torchvision's tensor names,
// both ways, against torchvision itself in the venv's Python
// (tests/models/torchvision_check.py) with random weights, no download:
// - torchvision's state dict (torch.save) loads with model.init_strict: true
//   (`gputrain plan`), and `gputrain predict` from it gives torchvision's
//   probabilities on the same images (resize 256, centre crop 224, ImageNet
//   normalisation);
// - what `gputrain export` writes (--format state_dict, and the .pt beside
//   --format pytorch's module) loads into torchvision.models.<net> with
//   strict=True and gives gputrain's outputs.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/config/load.h"
#include "gputrain/data/dataset.h"
#include "gputrain/data/export.h"
#include "gputrain/models/factory.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/tolerance.h"

namespace gputrain::models {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kClasses = 3;

struct Network {
  const char* config;       // under configs/
  const char* torchvision;  // torchvision.models' function
};

std::ostream& operator<<(std::ostream& out, const Network& net) { return out << net.torchvision; }

class TorchvisionRun {
 protected:
  // torchvision_check.py's run: nullopt (the test skips) without torch and torchvision in the venv.
  std::optional<std::string> python(const std::string& command, const Network& net) {
    const fs::path interpreter = testing::venv_python();
    if (!fs::exists(interpreter)) return std::nullopt;
    testing::GputrainProcess child({std::string(testing::kSourceDir) + "/tests/models/torchvision_check.py", command,
                                    dir_.path().string(), net.torchvision, std::to_string(kClasses)},
                                   {{"OMP_NUM_THREADS", "1"}}, dir_.path().string(), {}, interpreter.string());
    const testing::ProcessResult r = child.wait();
    if (r.exit_code == 3) return std::nullopt;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  // The shipped config on the generated folder, on the CPU.
  std::vector<std::string> config_args(const Network& net) const {
    const std::string folder = (dir_ / "folder").string();
    return {"--config", std::string(testing::kSourceDir) + "/configs/" + net.config,
            "--set",    "device=cpu",
            "--set",    "data.root=" + folder,
            "--set",    "data.test_root=" + folder + "/train",
            "--set",    "data.num_workers=0",
            "--set",    "data.batch_size=4"};  // `plan` measures a step of it: ResNet-50's 256 at 224 takes minutes
  }

  testing::ProcessResult gputrain(std::vector<std::string> args, const Network& net) const {
    const auto more = config_args(net);
    args.insert(args.end(), more.begin(), more.end());
    return testing::run_gputrain(args);
  }

  testing::TempDir dir_{"torchvision"};
};

class Torchvision : public TorchvisionRun, public ::testing::TestWithParam<Network> {
 protected:
  std::optional<std::string> python(const std::string& command) { return TorchvisionRun::python(command, GetParam()); }
  testing::ProcessResult gputrain(std::vector<std::string> args) const {
    return TorchvisionRun::gputrain(std::move(args), GetParam());
  }
};

// The p_<class> columns of predict's CSV, row by row.
std::vector<std::vector<double>> probabilities(const std::string& csv) {
  std::istringstream in(csv);
  std::vector<std::vector<double>> rows;
  std::string line;
  std::getline(in, line);
  std::vector<bool> wanted;
  std::istringstream header(line);
  for (std::string field; std::getline(header, field, ',');) wanted.push_back(field.rfind("p_", 0) == 0);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<double>& row = rows.emplace_back();
    std::size_t column = 0;
    for (std::string field; std::getline(fields, field, ','); ++column) {
      if (column < wanted.size() && wanted[column]) row.push_back(std::stod(field));
    }
  }
  return rows;
}

TEST_P(Torchvision, ItsStateDictLoadsStrictlyAndPredictGivesItsProbabilities) {
  const auto made = python("make");
  if (!made) GTEST_SKIP() << "no torch or torchvision in " << testing::venv_python() << ": setup.sh";
  const std::string tv = (dir_ / "tv.pth").string();
  const testing::ProcessResult plan =
      gputrain({"plan", "--set", "model.init_from=" + tv, "--set", "model.init_strict=true"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err << plan.out;
  EXPECT_NE((plan.out + plan.err).find("model.init_from: " + tv), std::string::npos) << plan.out << plan.err;

  const std::string csv = (dir_ / "predictions.csv").string();
  const testing::ProcessResult predicted =
      gputrain({"predict", "--checkpoint", tv, "--input", (dir_ / "folder" / "train").string(), "--out", csv});
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  std::ifstream file(csv);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto ours = probabilities(text);
  // torchvision's, in the images' sorted path order (predict's, as it lists a folder).
  const json expected = json::parse(*made);
  ASSERT_EQ(ours.size(), expected.size()) << text;
  // Probabilities to 1e-4 (the CSV keeps 6 digits): another library's
  // convolutions sum in another order, and both decode the same PNG exactly.
  double largest = 0;
  for (std::size_t row = 0; row < ours.size(); ++row) {
    ASSERT_EQ(ours[row].size(), expected[row].size()) << text;
    for (std::size_t c = 0; c < ours[row].size(); ++c) {
      EXPECT_NEAR(ours[row][c], expected[row][c].get<double>(), 1e-4) << "image " << row << ", class " << c;
      largest = std::max(largest, std::abs(ours[row][c] - expected[row][c].get<double>()));
    }
  }
  std::cout << GetParam().torchvision << ": predict's probabilities against torchvision's: largest difference "
            << largest << "\n";
}

TEST_P(Torchvision, WhatGputrainExportsLoadsStrictlyIntoTorchvisionAndGivesItsOutputs) {
  if (!fs::exists(testing::venv_python())) GTEST_SKIP() << "no venv Python: setup.sh";
  const auto made = python("make");  // the folder the config reads its classes from
  if (!made) GTEST_SKIP() << "no torch or torchvision in " << testing::venv_python() << ": setup.sh";
  config::LoadedConfig loaded = config::load_config(std::string(testing::kSourceDir) + "/configs/" + GetParam().config);
  torch::manual_seed(5);
  torch::nn::Sequential model = make_model(loaded.config.model, {{3, 224, 224}, kClasses});
  {
    torch::NoGradGuard no_grad;
    for (auto& parameter : model->parameters()) parameter.add_(torch::rand_like(parameter) * 0.02 - 0.01);
    for (auto& buffer : model->named_buffers()) {
      const std::string& key = buffer.key();
      if (key.find("running_mean") != std::string::npos) buffer.value().uniform_(-0.1, 0.1);
      if (key.find("running_var") != std::string::npos) buffer.value().uniform_(0.5, 1.5);
    }
  }
  const std::string saved = (dir_ / "saved.pt").string();
  checkpoint::save_weights(model, saved);
  // The weights alone need no config; the PyTorch module is the config's network.
  const testing::ProcessResult weights = testing::run_gputrain(
      {"export", "--checkpoint", saved, "--format", "state_dict", "--out", (dir_ / "exported.pth").string()});
  ASSERT_EQ(weights.exit_code, 0) << weights.err;
  fs::create_directories(dir_ / "pytorch");
  const testing::ProcessResult module = gputrain({"export", "--checkpoint", saved, "--format", "pytorch", "--out",
                                                  (dir_ / "pytorch" / "model.py").string(), "--no-normalize-inputs"});
  ASSERT_EQ(module.exit_code, 0) << module.err;
  torch::manual_seed(6);
  const torch::Tensor input = torch::randn({2, 3, 224, 224});
  model->eval();
  torch::NoGradGuard no_grad;
  data::write_npy(dir_ / "input.npy", input);
  data::write_npy(dir_ / "expected.npy", model->forward(input).contiguous());
  const auto found = python("check");
  ASSERT_TRUE(found);
  const json r = json::parse(*found);
  // To 1e-4 of the outputs' largest magnitude: torch's and LibTorch's CPU
  // convolutions may pick other algorithms and sum in another order.
  for (const char* export_format : {"state_dict", "pytorch"}) {
    const json& one = r.at(export_format);
    std::cout << GetParam().torchvision << ": " << export_format << " in torchvision against gputrain: " << one.dump()
              << "\n";
    EXPECT_LE(one["max_abs"].get<double>(), testing::relative_tolerance(1e-4, one["scale"].get<double>()))
        << export_format << ": " << one.dump();
  }
}

// configs/resnet50_finetune_folder.yaml from torchvision's resnet50 state dict
// (drawn here for the folder's 3 classes; the recipe downloads ImageNet's,
// whose 1000-class head is then skipped): every tensor loads by name, the body
// frozen for its first 5 epochs, as `gputrain plan` shows before anything runs.
class TorchvisionFinetune : public TorchvisionRun, public ::testing::Test {};

TEST_F(TorchvisionFinetune, TheResnet50RecipeLoadsTorchvisionsBodyAndFreezesItFirst) {
  const Network net{"resnet50_finetune_folder.yaml", "resnet50"};
  const auto made = python("make", net);
  if (!made) GTEST_SKIP() << "no torch or torchvision in " << testing::venv_python() << ": setup.sh";
  const testing::ProcessResult plan = gputrain({"plan", "--set", "model.init_from=" + (dir_ / "tv.pth").string()}, net);
  ASSERT_EQ(plan.exit_code, 0) << plan.err << plan.out;
  const std::string text = plan.out + plan.err;
  for (const char* line :
       {"320 tensors loaded",
        "model.freeze: 159 parameter tensors frozen under conv1, bn1, layer1, layer2, layer3, layer4",
        "model.freeze_epochs: frozen for the first 5 epochs only, then trained at lr × 0.1"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, Torchvision,
                         ::testing::Values(Network{"resnet18_folder.yaml", "resnet18"},
                                           Network{"resnet50_folder.yaml", "resnet50"},
                                           Network{"vit_b_16_folder.yaml", "vit_b_16"}),
                         [](const auto& info) { return std::string(info.param.torchvision); });

}  // namespace
}  // namespace gputrain::models
