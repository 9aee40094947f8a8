// Issue 40 #4: model.init_from's reader. Every weights file gputrain writes
// reads back as the same named tensors, whatever its format, and a file that
// is none of them (an ONNX model, random bytes, one cut short) is a
// CheckpointError (exit 2) naming the file and the files it may be.
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "gputrain/checkpoint/safetensors.h"
#include "gputrain/checkpoint/state_dict.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "support/paths.h"
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
    const ChosenWeights chosen = read_chosen_weights((dir_ / "model.pt").string(), ExportedWeights::kEvaluated);
    testing::write_text(dir_ / "w.safetensors", safetensors_bytes({chosen.tensors, {{"format", "pt"}}}));
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

// The pickle machine on crafted data.pkl bytes (what fuzz_state_dict feeds
// it): each is a CheckpointError saying what it found, never a crash, and a
// dict put inside itself is let go of (LeakSanitizer would see the cycle).
TEST(UnpickleStateDict, CraftedPicklesAreRefusedSayingWhatTheyHold) {
  const auto refusal = [](const std::string& pickle) {
    const auto record = [](const std::string&) -> std::optional<std::string> { return std::string(64, '\0'); };
    try {
      unpickle_state_dict(pickle, record, "x.pt");
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "read";
    return std::string();
  };
  using namespace std::string_literals;  // the pickles hold NUL bytes
  const std::string proto = "\x80\x02"s;
  EXPECT_NE(refusal(proto + "}q\x00(h\x00h\x00u."s).find("x.pt: its dict holds something other than a tensor"),
            std::string::npos);
  EXPECT_NE(refusal(proto + "cos\nsystem\n"s).find("x.pt: is not a state dict gputrain reads: it refers to os.system"),
            std::string::npos);
  EXPECT_NE(refusal(proto + "}("s).find("its data.pkl ends early"), std::string::npos);
  EXPECT_NE(refusal(proto + "K\x01."s).find("holds a pickled value that is not a dict"), std::string::npos);
  EXPECT_NE(refusal(proto + "u"s).find("closes a mark it never opened"), std::string::npos);
  EXPECT_NE(refusal(proto + "h\x07"s).find("recalls memo 7"), std::string::npos);
  // A storage of 16 floats (64 bytes) read as 4 x 8 with stride 8 reaches past it.
  const std::string storage =
      "X\x07\x00\x00\x00storage"
      "ctorch\nFloatStorage\n"
      "X\x01\x00\x00\x00"
      "0"
      "X\x03\x00\x00\x00"
      "cpu"
      "K\x10tQ"s;
  const std::string tensor =
      "ctorch._utils\n_rebuild_tensor_v2\n(("s + storage + "K\x00K\x04K\x08\x86K\x08K\x01\x86\x89NtR"s;
  EXPECT_NE(refusal(proto + "}X\x01\x00\x00\x00w"s + tensor + "s."s).find("does not fit in its storage"),
            std::string::npos);
}

// fuzz_state_dict's seeds (tests/fuzz/make_seeds.py pickles them as torch.save does, with
// _metadata) read as the tensors they declare, and the damaged ones are refused.
TEST(UnpickleStateDict, TheFuzzSeedsReadAsPythonsStateDicts) {
  const std::filesystem::path seeds = std::filesystem::path(testing::kSourceDir) / "tests/fuzz/corpus/state_dict";
  const auto record = [](const std::string&) -> std::optional<std::string> { return std::string(64, '\0'); };
  for (const std::string seed : {"python-state-dict", "no-metadata"}) {
    const auto tensors = unpickle_state_dict(testing::read_text(seeds / seed), record, seed);
    ASSERT_EQ(tensors.size(), 1u) << seed;
    EXPECT_EQ(tensors[0].first, "fc.weight");
    EXPECT_TRUE(torch::equal(tensors[0].second, torch::zeros({4, 4}))) << seed;
  }
  const auto two = unpickle_state_dict(testing::read_text(seeds / "two-tensors"), record, "two");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].second.sizes(), torch::IntArrayRef({16}));
  for (const std::string seed : {"past-its-storage", "truncated", "empty"}) {
    EXPECT_THROW(unpickle_state_dict(testing::read_text(seeds / seed), record, seed), CheckpointError) << seed;
  }
}

}  // namespace
}  // namespace gputrain::checkpoint
