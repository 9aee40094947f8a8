// Issue 40 #4: fine-tuning through the real binary, on generated
// Fashion-MNIST. configs/fashion_mnist_finetune.yaml's two stages (the fast
// recipe on five classes, then a new head for ten on its frozen body), the
// weights files model.init_from takes, and the bad input it refuses with
// exit 2, the file and the fix named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gputrain/checkpoint/weights.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

namespace fs = std::filesystem;

std::map<std::string, torch::Tensor> weights_of(const fs::path& file) {
  const checkpoint::NamedWeights weights = checkpoint::read_weights(file.string());
  return {weights.tensors.begin(), weights.tensors.end()};
}

class FineTune : public ::testing::Test {
 protected:
  void SetUp() override {
    const ProcessResult data =
        run_gputrain({"datasets", "make-idx", "--out", (dir_ / "fm").string(), "--train", "48", "--test", "16"});
    ASSERT_EQ(data.exit_code, 0) << data.err;
    // Stage 1: the fast recipe on the first five classes, one short epoch.
    const ProcessResult first =
        run_gputrain({"train", "--config", "configs/fashion_mnist_fast.yaml", "--output", (dir_ / "runs").string(),
                      "--set", "name=five", "--set", "device=cpu", "--set", "data.root=" + (dir_ / "fm").string(),
                      "--set", "data.batch_size=16", "--set", "train.epochs=1", "--set", "train.target_accuracy=0",
                      "--set", "data.keep_classes=[0,1,2,3,4]"});
    ASSERT_EQ(first.exit_code, 0) << first.err;
  }

  fs::path stage_one() const { return dir_ / "runs" / "five" / "model.pt"; }

  // Stage 2: the recipe itself, from `weights`, with `extra` overrides; `command` train or plan.
  ProcessResult fine_tune(const fs::path& weights, std::vector<std::string> extra = {},
                          const std::string& command = "train") {
    std::vector<std::string> args{command,
                                  "--config",
                                  "configs/fashion_mnist_finetune.yaml",
                                  "--set",
                                  "output.dir=" + (dir_ / "runs").string(),
                                  "--set",
                                  "device=cpu",
                                  "--set",
                                  "data.root=" + (dir_ / "fm").string(),
                                  "--set",
                                  "data.batch_size=16",
                                  "--set",
                                  "train.epochs=1",
                                  "--set",
                                  "model.init_from=" + weights.string()};
    for (std::string& e : extra) {
      args.push_back("--set");
      args.push_back(std::move(e));
    }
    return run_gputrain(args);
  }

  TempDir dir_{"finetune"};
};

// The body comes from stage 1 and stays as it was (batchnorm's running
// statistics too: eval mode); the head, skipped for its class count, trains.
TEST_F(FineTune, RecipeLoadsTheBodyKeepsItFrozenAndTrainsTheNewHead) {
  const ProcessResult r = fine_tune(stage_one());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 tensor skipped, 1280 values keep their initialisation: fc1.weight: [5, 128] in the file, "
                       "[10, 128] in the model"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("model.freeze_batchnorm: eval"), std::string::npos) << r.err;
  const auto before = weights_of(stage_one());
  const auto after = weights_of(dir_ / "runs" / "fashion-mnist-finetune" / "model.pt");
  for (const std::string name : {"conv1.weight", "bn1.weight", "bn1.running_mean", "bn6.running_var",
                                 "res3.layers.conv7.weight", "res3.layers.bn7.running_mean"}) {
    EXPECT_TRUE(torch::equal(before.at(name), after.at(name))) << name;
  }
  EXPECT_EQ(after.at("fc1.weight").size(0), 10);
  // With freeze_batchnorm: train, the frozen batchnorm layers' statistics move.
  const ProcessResult moving = fine_tune(stage_one(), {"model.freeze_batchnorm=train", "name=bn-train"});
  ASSERT_EQ(moving.exit_code, 0) << moving.err;
  const auto trained = weights_of(dir_ / "runs" / "bn-train" / "model.pt");
  EXPECT_TRUE(torch::equal(before.at("bn1.weight"), trained.at("bn1.weight")));
  EXPECT_FALSE(torch::equal(before.at("bn1.running_mean"), trained.at("bn1.running_mean")));
}

// Issue 58: model.freeze_epochs holds the frozen body for its epochs (at lr 0),
// then trains it at the schedule's lr x model.unfreeze_lr_multiplier; the new
// head trains from the first step.
TEST_F(FineTune, FreezeEpochsHoldsTheBodyForItsEpochsThenTrainsIt) {
  const ProcessResult r =
      fine_tune(stage_one(), {"model.freeze_epochs=1", "model.unfreeze_lr_multiplier=0.1", "train.epochs=2",
                              "checkpoint.every=1", "checkpoint.keep=2", "name=thaw"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<fs::path> epochs;  // ckpt-s<step>-e<epoch>-b<batch>.ckpt: in name order, epoch 1's, then epoch 2's
  for (const auto& entry : fs::directory_iterator(dir_ / "runs" / "thaw" / "checkpoints")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0) epochs.push_back(entry.path());
  }
  std::sort(epochs.begin(), epochs.end());
  ASSERT_EQ(epochs.size(), 2u) << r.err;
  const auto before = weights_of(stage_one());
  const auto first = weights_of(epochs[0]);
  const auto second = weights_of(epochs[1]);
  for (const std::string name : {"conv1.weight", "bn1.weight", "res3.layers.conv7.weight"}) {
    EXPECT_TRUE(torch::equal(before.at(name), first.at(name))) << name << " moved in its frozen epoch";
    EXPECT_FALSE(torch::equal(first.at(name), second.at(name))) << name << " stayed frozen after model.freeze_epochs";
  }
  EXPECT_FALSE(torch::equal(first.at("fc1.weight"), second.at("fc1.weight"))) << "the head trains in every epoch";
}

// A state dict from `gputrain export`, safetensors, and one saved by PyTorch
// from Python give what the model.pt gives; `gputrain plan` shows it.
TEST_F(FineTune, ExportedAndPythonStateDictsLoadAsTheModelPt) {
  const fs::path dict = dir_ / "five.pt";
  const fs::path tensors = dir_ / "five.safetensors";
  ASSERT_EQ(run_gputrain({"export", "--checkpoint", stage_one().string(), "--out", dict.string()}).exit_code, 0);
  ASSERT_EQ(run_gputrain(
                {"export", "--checkpoint", stage_one().string(), "--out", tensors.string(), "--format", "safetensors"})
                .exit_code,
            0);
  std::vector<fs::path> files{dict, tensors};
  const fs::path python = venv_python();
  if (fs::exists(python)) {
    // An OrderedDict with _metadata, as every module's state_dict() is; and, refused, a whole module pickled.
    const fs::path from_python = dir_ / "python_state_dict.pt";
    const fs::path whole = dir_ / "python_module.pt";
    const std::string command = python.string() + " -c \"import torch; m = torch.jit.load('" + stage_one().string() +
                                "'); torch.save(m.state_dict(), '" + from_python.string() +
                                "'); torch.save(torch.nn.Linear(2, 2), '" + whole.string() + "')\"";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    files.push_back(from_python);
    const ProcessResult refused = fine_tune(whole, {}, "plan");
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.out.find(whole.string() + ": is not a state dict gputrain reads: it refers to "
                                                "torch.nn.modules.linear.Linear; save a dict of tensors"),
              std::string::npos)
        << refused.out << refused.err;
  } else {
    ADD_FAILURE() << "no Python with torch at " << python << ": the PyTorch state dict was not tried";
  }
  for (const fs::path& file : files) {
    const ProcessResult r = fine_tune(file, {}, "plan");
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.err;
    EXPECT_NE(r.out.find("42 tensors loaded (294719 values)"), std::string::npos) << file << ": " << r.out;
  }
}

TEST_F(FineTune, BadInputIsExit2NamingTheFileAndTheFix) {
  const auto expect_refused = [&](const fs::path& file, const std::vector<std::string>& extra,
                                  const std::vector<std::string>& says) {
    const ProcessResult r = fine_tune(file, extra);
    EXPECT_EQ(r.exit_code, 2) << file << ": " << r.err;
    for (const std::string& text : says) EXPECT_NE(r.err.find(text), std::string::npos) << text << "\n" << r.err;
  };
  const fs::path onnx = dir_ / "five.onnx";
  ASSERT_EQ(run_gputrain({"export", "--checkpoint", stage_one().string(), "--out", onnx.string(), "--format", "onnx",
                          "--config", "configs/fashion_mnist_fast.yaml", "--set", "data.root=" + (dir_ / "fm").string(),
                          "--set", "data.keep_classes=[0,1,2,3,4]"})
                .exit_code,
            0);
  expect_refused(onnx, {}, {onnx.string() + ": is not a weights file gputrain reads", "a .safetensors file"});
  const fs::path random = write_text(dir_ / "random.bin", std::string(4096, '\x17'));
  expect_refused(random, {}, {random.string() + ": is not a weights file gputrain reads"});
  const std::string dict = read_text(stage_one());
  const fs::path cut = write_text(dir_ / "cut.pt", dict.substr(0, dict.size() / 2));
  expect_refused(cut, {}, {cut.string() + ": is a zip archive", "cut short or damaged; write it again"});
  ASSERT_EQ(run_gputrain({"export", "--checkpoint", stage_one().string(), "--out", (dir_ / "w.safetensors").string(),
                          "--format", "safetensors"})
                .exit_code,
            0);
  const std::string tensors = read_text(dir_ / "w.safetensors");
  const fs::path cut_tensors = write_text(dir_ / "cut.safetensors", tensors.substr(0, tensors.size() - 100));
  expect_refused(cut_tensors, {}, {cut_tensors.string() + ": "});
  expect_refused(stage_one(), {"model.init_strict=true"},
                 {"model.init_strict",
                  stage_one().string() + ": 1 tensor would be skipped, not fitting the model: fc1.weight: [5, 128]",
                  "set model.init_strict: false"});
  expect_refused(stage_one(), {"model.freeze=[conv1, block9]"},
                 {"model.freeze: 'block9' matches no parameter of the model", "conv1, bn1, gelu1, conv2"});
  // Weights of another model: nothing fits.
  expect_refused(stage_one(), {"model.layers=[flatten, {type: linear, out_features: 10}]", "model.freeze=[]"},
                 {stage_one().string() + ": none of its 43 tensors fits this model"});
}

}  // namespace
}  // namespace gputrain::testing
