// Issue 40 #4: model.init_from's reader. Every weights file gputrain writes
// reads back as the same named tensors, whatever its format, and a file that
// is none of them (an ONNX model, random bytes, one cut short) is a
// CheckpointError (exit 2) naming the file and the files it may be.
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "gputrain/checkpoint/safetensors.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "support/temp_dir.h"

namespace gputrain::checkpoint {
namespace {

using testing::TempDir;

torch::nn::Sequential small_model(uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential model;
  model->push_back("fc", torch::nn::Linear(3, 4));
  model->push_back("bn", torch::nn::BatchNorm1d(4));
  return model;
}

std::string error_of(const std::filesystem::path& file) {
  try {
    read_weights(file.string());
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    return e.what();
  }
  ADD_FAILURE() << file << " was read";
  return "";
}

class ReadWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    model_->forward(torch::randn({5, 3}));  // running statistics that are not the initial ones
    save_weights(model_, (dir_ / "model.pt").string());
    testing::write_text(dir_ / "state_dict.pt", state_dict_bytes(*model_));
    ExportOptions options;
    options.format = WeightsFormat::kSafetensors;
    export_weights((dir_ / "model.pt").string(), (dir_ / "w.safetensors").string(), options);
  }
  torch::nn::Sequential model_ = small_model(1);
  TempDir dir_;
};

TEST_F(ReadWeights, EveryFormatGivesTheModelsTensorsByName) {
  for (const std::string file : {"model.pt", "state_dict.pt", "w.safetensors"}) {
    const NamedWeights weights = read_weights((dir_ / file).string());
    std::map<std::string, torch::Tensor> by_name(weights.tensors.begin(), weights.tensors.end());
    EXPECT_EQ(by_name.size(), 7u) << file;  // fc: weight, bias; bn: weight, bias and three buffers
    for (const auto& p : model_->named_parameters()) {
      ASSERT_TRUE(by_name.count(p.key())) << file << ": " << p.key();
      EXPECT_TRUE(torch::equal(by_name.at(p.key()), p.value())) << file << ": " << p.key();
    }
    EXPECT_TRUE(torch::equal(by_name.at("bn.running_mean"), model_->named_buffers()["bn.running_mean"])) << file;
  }
}

TEST_F(ReadWeights, LoadNamedWeightsCopiesOnlyTheTensorsGiven) {
  torch::nn::Sequential other = small_model(2);
  const torch::Tensor bias_before = other->named_parameters()["fc.bias"].clone();
  const NamedWeights weights = read_weights((dir_ / "state_dict.pt").string());
  std::vector<std::pair<std::string, torch::Tensor>> some;
  for (const auto& entry : weights.tensors) {
    if (entry.first != "fc.bias") some.push_back(entry);
  }
  load_named_weights(*other, some);
  EXPECT_TRUE(torch::equal(other->named_parameters()["fc.weight"], model_->named_parameters()["fc.weight"]));
  EXPECT_TRUE(torch::equal(other->named_parameters()["fc.bias"], bias_before));
  EXPECT_TRUE(torch::equal(other->named_buffers()["bn.running_var"], model_->named_buffers()["bn.running_var"]));
}

TEST_F(ReadWeights, ForeignAndCutShortFilesAreRefusedNamingTheFileAndTheFix) {
  // An ONNX model's first bytes: protobuf field 1 (ir_version), then the producer's name.
  const auto onnx = testing::write_text(dir_ / "model.onnx", std::string("\x08\x08\x12\x08gputrain:\x04\x0a", 14));
  EXPECT_NE(error_of(onnx).find(onnx.string() + ": is not a weights file gputrain reads"), std::string::npos);
  EXPECT_NE(error_of(onnx).find("torch.save(model.state_dict(), path)"), std::string::npos);
  const auto random = testing::write_text(dir_ / "random.bin", std::string(64, '\x5a'));
  EXPECT_NE(error_of(random).find(random.string() + ": is not a weights file"), std::string::npos);
  const std::string dict = testing::read_text(dir_ / "state_dict.pt");
  const auto cut = testing::write_text(dir_ / "cut.pt", dict.substr(0, dict.size() / 2));
  EXPECT_NE(error_of(cut).find(cut.string() + ": is a zip archive, as PyTorch writes, but cannot be read"),
            std::string::npos);
  const std::string tensors = testing::read_text(dir_ / "w.safetensors");
  const auto cut_tensors = testing::write_text(dir_ / "cut.safetensors", tensors.substr(0, tensors.size() - 5));
  EXPECT_NE(error_of(cut_tensors).find(cut_tensors.string()), std::string::npos);
  EXPECT_NE(error_of(dir_ / "absent.pt").find("absent.pt"), std::string::npos);
}

}  // namespace
}  // namespace gputrain::checkpoint
