// model.init_from and model.freeze resolved: which tensors load, which are
// skipped and why, what is frozen, and each refusal a ConfigError (exit 2)
// at its key naming the file, the tensors and the fix.
#include "gputrain/plan/model_init.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/models/factory.h"
#include "support/temp_dir.h"

namespace gputrain::plan {
namespace {

config::LoadedConfig config_of(const std::vector<std::string>& overrides) {
  return config::load_config_text(R"(
data: {dataset: synthetic, samples: 20, test_samples: 4, features: 6, classes: 3}
model: {layers: [{type: linear, out_features: 8}, batchnorm, relu, linear]}
)",
                                  "init.yaml", overrides);
}

data::DatasetInfo info_of(const config::LoadedConfig& loaded) {
  return data::make_dataset(loaded.config.data, data::Split::kTrain, 0)->info();
}

// The model the plan matches against: model.* built on the CPU.
torch::nn::Sequential cpu_model(const config::LoadedConfig& loaded) {
  return models::build_model(loaded.config.model, info_of(loaded), torch::Device(torch::kCPU));
}

std::string refusal(const config::LoadedConfig& loaded) {
  try {
    resolve_model_init(loaded, *cpu_model(loaded));
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    return e.what();
  }
  ADD_FAILURE() << "not refused";
  return "";
}

class ModelInit : public ::testing::Test {
 protected:
  // Weights of the same layers for 5 classes: everything fits but the head (fc2).
  void SetUp() override {
    const config::LoadedConfig five = config_of({"data.classes=5"});
    checkpoint::save_weights(models::build_model(five.config.model, info_of(five), torch::Device(torch::kCPU)),
                             weights_.string());
  }
  testing::TempDir dir_;
  std::filesystem::path weights_ = dir_ / "five.pt";
};

TEST_F(ModelInit, NothingAskedIsNothingDone) {
  const ModelInitPlan plan = resolve_model_init(config_of({}), *cpu_model(config_of({})));
  EXPECT_TRUE(plan.loaded.empty());
  EXPECT_TRUE(plan.describe().empty());
}

TEST_F(ModelInit, TheTensorsThatFitLoadAndTheNewHeadIsListedAsSkipped) {
  const config::LoadedConfig loaded = config_of({"model.init_from=" + weights_.string(), "model.freeze=[fc1, bn1]"});
  const ModelInitPlan plan = resolve_model_init(loaded, *cpu_model(loaded));
  std::vector<std::string> names;
  for (const auto& [name, tensor] : plan.loaded) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                             "bn1.running_var", "bn1.num_batches_tracked"}));
  EXPECT_EQ(plan.skipped, (std::vector<std::string>{"fc2.weight: [5, 8] in the file, [3, 8] in the model",
                                                    "fc2.bias: [5] in the file, [3] in the model"}));
  EXPECT_EQ(plan.skipped_values, 3 * 8 + 3);
  EXPECT_EQ(plan.frozen_tensors, 4);
  EXPECT_EQ(plan.frozen_values, 6 * 8 + 8 + 8 + 8);
  EXPECT_EQ(plan.trainable_values, 3 * 8 + 3);
  const std::vector<std::string> lines = plan.describe();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[2].find("model.freeze: 4 parameter tensors frozen under fc1, bn1 (72 values); 27 values train"),
            std::string::npos)
      << lines[2];
}

TEST_F(ModelInit, StrictRefusesATensorThatDoesNotFit) {
  const std::string what = refusal(config_of({"model.init_from=" + weights_.string(), "model.init_strict=true"}));
  EXPECT_NE(what.find("model.init_strict: " + weights_.string() +
                      ": 2 tensors would be skipped, not fitting the model: fc2.weight"),
            std::string::npos)
      << what;
}

TEST_F(ModelInit, AFileOfAnotherModelIsRefused) {
  const std::string what = refusal(config_of({"model.init_from=" + weights_.string(), "model.layers=[linear]"}));
  EXPECT_NE(what.find(weights_.string() + ": none of its 9 tensors fits this model"), std::string::npos) << what;
}

// Issue 62 #9: weights holding NaN or infinity are refused at load, each
// tensor named, at model.init_from's key; they would make the loss non-finite
// in the first steps, blamed on optim.lr.
TEST_F(ModelInit, AFileHoldingNaNOrInfinityIsRefusedNamingTheTensors) {
  const config::LoadedConfig five = config_of({"data.classes=5"});
  torch::nn::Sequential diverged = models::build_model(five.config.model, info_of(five), torch::Device(torch::kCPU));
  {
    torch::NoGradGuard no_grad;
    diverged->named_parameters()["fc1.weight"][0][1] = std::nan("");
    diverged->named_buffers()["bn1.running_var"][2] = std::numeric_limits<float>::infinity();
  }
  const std::filesystem::path file = dir_ / "diverged.pt";
  checkpoint::save_weights(diverged, file.string());
  try {
    resolve_model_init(config_of({"model.init_from=" + file.string()}), *cpu_model(config_of({})));
    ADD_FAILURE() << "non-finite weights loaded";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.key(), "model.init_from");
    EXPECT_TRUE(e.where().known()) << what;
    EXPECT_NE(what.find(file.string() + ": 2 tensors hold NaN or infinite values: fc1.weight (1 of its 48 values); "
                                        "bn1.running_var (1 of its 8 values)"),
              std::string::npos)
        << what;
  }
}

// Issue 62, weak: a file that is not weights is refused at model.init_from's
// key and line, judged by its first bytes without reading the rest.
TEST_F(ModelInit, AFileThatIsNotWeightsIsRefusedAtTheKeyUnread) {
  const std::filesystem::path recording = dir_ / "recording.wav";
  testing::write_text(recording, "RIFF\x24\x08\x01\x01WAVEfmt and the rest of a recording");
  std::filesystem::resize_file(recording, 64 << 20);
  const auto bytes_read = [] {
    std::ifstream io("/proc/self/io");
    std::string key;
    int64_t value = -1;
    while (io >> key >> value && key != "rchar:") {
    }
    return key == "rchar:" ? value : int64_t{-1};
  };
  const int64_t before = bytes_read();
  if (before < 0) GTEST_SKIP() << "no /proc/self/io on this kernel";
  const std::string what = refusal(config_of({"model.init_from=" + recording.string()}));
  EXPECT_LT(bytes_read() - before, 1 << 20) << "the file was read whole before it was refused";
  EXPECT_NE(what.find("model.init_from: " + recording.string() + ": is not a weights file gputrain reads"),
            std::string::npos)
      << what;
}

// Issue 62, weak: a state dict saved from a model wrapped in PyTorch's
// DistributedDataParallel names every tensor "module.<name>"; it loads
// without the prefix, as torch's consume_prefix_in_state_dict_if_present would.
TEST_F(ModelInit, AStateDictOfAWrappedModelLoadsWithoutItsModulePrefix) {
  const config::LoadedConfig five = config_of({"data.classes=5"});
  torch::nn::Module wrapper;  // as DistributedDataParallel holds the model: its child "module"
  wrapper.register_module("module", models::build_model(five.config.model, info_of(five), torch::Device(torch::kCPU)));
  const std::filesystem::path file = dir_ / "ddp.pt";
  testing::write_text(file, checkpoint::state_dict_bytes(wrapper));
  const config::LoadedConfig loaded = config_of({"model.init_from=" + file.string()});
  const ModelInitPlan plan = resolve_model_init(loaded, *cpu_model(loaded));
  ASSERT_EQ(plan.loaded.size(), 7u);
  EXPECT_EQ(plan.loaded.front().first, "fc1.weight");
}

TEST_F(ModelInit, AFreezePrefixMatchingNothingListsTheLayers) {
  const std::string what = refusal(config_of({"model.freeze=[fc1, head]"}));
  EXPECT_NE(what.find("model.freeze: 'head' matches no parameter of the model"), std::string::npos) << what;
  EXPECT_NE(what.find("the model's layers are: fc1, bn1, relu1, fc2"), std::string::npos) << what;
  EXPECT_NE(refusal(config_of({"model.freeze=[fc1, bn1, fc2]"})).find("freezes every parameter"), std::string::npos);
}

// A prefix that names a buffer or a layer without parameters says so: "matches no parameter" beside a list of
// layers that held it (relu1) left the user guessing.
TEST_F(ModelInit, AFreezePrefixNamingABufferOrAParameterlessLayerSaysSo) {
  for (const std::string buffer : {"bn1.running_mean", "bn1.num_batches_tracked"}) {
    const std::string what = refusal(config_of({"model.freeze=[" + buffer + "]"}));
    EXPECT_NE(what.find("'" + buffer + "' names a buffer (batchnorm's running statistics), not a parameter"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("model.freeze_batchnorm: eval"), std::string::npos) << what;
  }
  const std::string what = refusal(config_of({"model.freeze=[relu1]"}));
  EXPECT_NE(what.find("'relu1' is a layer without parameters, so there is nothing to freeze"), std::string::npos)
      << what;
}

}  // namespace
}  // namespace gputrain::plan
