// Issue 61 #1: `gputrain plan` and `gputrain train` cannot disagree. On a
// table of configs train refuses, plan lists the very refusal train stops at,
// word for word, and both exit 2; every check that needs no live object is
// made by the plan both resolve.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain {
namespace {

namespace fs = std::filesystem;
using testing::ProcessResult;
using testing::run_gputrain;
using testing::TempDir;
using testing::write_text;

// 64 samples in batches of 16: 4 steps an epoch, on the CPU.
const char* const kBase = R"(name: agree
device: cpu
data: {dataset: synthetic, samples: 64, test_samples: 16, features: 4, classes: 3, batch_size: 16, num_workers: 0,
       pin_memory: false}
model: {name: mlp, hidden: [8]}
optim: {name: sgd, lr: 0.1}
train: {epochs: 2}
checkpoint: {every: 1}
)";

const char* const kBatchnorm =
    "model={name: layers, layers: [{type: linear, out_features: 8}, batchnorm, relu, linear]}";

struct Refused {
  std::string name;
  std::vector<std::string> sets;                     // --set, after output.dir=<the case's directory>/runs
  std::string expected;                              // in the one message both give
  std::function<void(const fs::path& dir)> setup{};  // files the case starts from
  std::vector<std::string> more{};                   // further arguments to both
  std::map<std::string, std::string> env{};          // the environment both run in
};

// The message of train's error line ("[...] [error] message"), or "" when there is none.
std::string error_line(const std::string& err) {
  const std::string tag = "[error] ";
  const std::size_t at = err.rfind(tag);
  if (at == std::string::npos) return "";
  const std::size_t end = err.find('\n', at);
  return err.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size());
}

class PlanAndTrain : public ::testing::Test {
 protected:
  // plan --json and train on `c` in a directory of its own; the same verdict and message from both.
  void expect_agreement(const Refused& c) {
    SCOPED_TRACE(c.name);
    const fs::path dir = dir_ / c.name;
    fs::create_directories(dir);
    const fs::path config = write_text(dir / "exp.yaml", kBase);
    if (c.setup) c.setup(dir);
    std::vector<std::string> sets{"--set", "output.dir=" + (dir / "runs").string()};
    for (const std::string& set : c.sets) sets.insert(sets.end(), {"--set", set});
    std::vector<std::string> plan_args{"plan", "--json", "--config", config.string()};
    std::vector<std::string> train_args{"train", "--config", config.string()};
    for (auto* args : {&plan_args, &train_args}) {
      args->insert(args->end(), sets.begin(), sets.end());
      args->insert(args->end(), c.more.begin(), c.more.end());
    }
    const ProcessResult planned = run_gputrain(plan_args, c.env);
    const ProcessResult trained = run_gputrain(train_args, c.env);
    ASSERT_EQ(planned.exit_code, 2) << planned.out << planned.err;
    ASSERT_EQ(trained.exit_code, 2) << trained.err;
    const nlohmann::json report = nlohmann::json::parse(planned.out);
    ASSERT_EQ(report["problems"].size(), 1u) << report["problems"].dump(1);
    const std::string listed = report["problems"][0].get<std::string>();
    EXPECT_NE(listed.find(c.expected), std::string::npos) << listed;
    EXPECT_EQ(error_line(trained.err), listed) << trained.err;
    EXPECT_FALSE(fs::exists(dir / "runs" / "agree" / "config.yaml")) << "train refused after writing its run";
  }

  TempDir dir_{"agree"};
};

TEST_F(PlanAndTrain, GiveTheSameRefusal) {
  // Holds the lock of a run directory as a running train does (report::RunDirLock), for the lock's case.
  int held = -1;
  const std::vector<Refused> cases{
      {"sync_batchnorm_under_dp",
       {"strategy=dp", "dp.replicas=2", "model.sync_batchnorm=true"},
       "model.sync_batchnorm: works under ddp, not dp"},
      {"a_rule_across_keys", {"train.accumulation_steps=3"}, "data.batch_size: 16 is not divisible"},
      {"fp16_on_the_cpu", {"train.amp=fp16"}, "train.amp: fp16 autocast needs CUDA"},
      {"a_gpu_the_machine_lacks", {"device=cuda", "gpus=[63]"}, "device"},
      {"missing_data", {"data={dataset: npy, root: /nonexistent/gputrain-agree}"}, "/nonexistent/gputrain-agree"},
      {"a_batch_of_one_through_batchnorm", {kBatchnorm, "data.samples=65"}, "leave a last batch of 1 sample"},
      {"test_time_views_of_features", {"train.tta.translate=2"}, "train.tta"},
      {"class_weights_for_other_classes", {"train.class_weights=[1, 2]"}, "train.class_weights"},
      {"init_from_a_missing_file", {"model.init_from=/nonexistent/gputrain-agree.pt"}, "model.init_from"},
      {"freeze_matching_nothing", {"model.freeze=[nothing]"}, "model.freeze"},
      {"nothing_fits_the_memory_budget",
       {"data.batch_size=auto", "train.target_batch=32", "train.max_memory=100"},
       "data.batch_size"},
      {"a_finished_run",
       {},
       "holds a finished run",
       [](const fs::path& dir) { write_text(dir / "runs" / "agree" / "model.pt", "weights"); }},
      {"a_foreign_file_among_the_checkpoints",
       {},
       "which is not a gputrain checkpoint",
       [](const fs::path& dir) { write_text(dir / "runs" / "agree" / "checkpoints" / "notes.txt", "mine"); }},
      {"an_output_dir_under_a_file",
       {},
       "is a file, not a directory",
       [](const fs::path& dir) {
         write_text(dir / "blocker", "a file");
         fs::remove_all(dir / "runs");
         fs::create_directory_symlink(dir / "blocker", dir / "runs");
       }},
      {"model_pt_is_a_directory",
       {},
       "is a directory, so the final weights could not be saved there",
       [](const fs::path& dir) { fs::create_directories(dir / "runs" / "agree" / "model.pt"); }},
      {"another_process_holds_the_run",
       {},
       "another gputrain process",
       [&held](const fs::path& dir) {
         fs::create_directories(dir / "runs" / "agree");
         held = ::open((dir / "runs" / "agree" / ".gputrain.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
         ASSERT_GE(held, 0);
         ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
         ASSERT_EQ(::write(held, "4242\n", 5), 5);
       }},
      {"nproc_under_a_launcher",
       {},
       "--nproc starts workers of its own",
       {},
       {"--nproc", "2"},
       {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29511"}}},
  };
  for (const Refused& c : cases) expect_agreement(c);
  if (held >= 0) ::close(held);
}

// A checkpoint that cannot continue under the config it is resumed with:
// plan --resume says what train --resume stops at.
TEST_F(PlanAndTrain, GiveTheSameRefusalOfACheckpoint) {
  const fs::path dir = dir_ / "resume";
  fs::create_directories(dir);
  const fs::path config = write_text(dir / "exp.yaml", kBase);
  const std::string output = "output.dir=" + (dir / "runs").string();
  const ProcessResult trained = run_gputrain({"train", "--config", config.string(), "--set", output});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  std::string checkpoint;  // the newest: ckpt-s<step>-e<epoch>-b<micro-batch>.ckpt sort by step
  for (const auto& entry : fs::directory_iterator(dir / "runs" / "agree" / "checkpoints")) {
    checkpoint = std::max(checkpoint, entry.path().string());
  }
  ASSERT_NE(checkpoint.find("-e0002-b000000.ckpt"), std::string::npos) << checkpoint;
  const std::vector<std::string> sets{"--resume", checkpoint, "--set", "train.epochs=1"};
  std::vector<std::string> plan_args{"plan", "--json"}, train_args{"train"};
  plan_args.insert(plan_args.end(), sets.begin(), sets.end());
  train_args.insert(train_args.end(), sets.begin(), sets.end());
  const ProcessResult planned = run_gputrain(plan_args);
  const ProcessResult resumed = run_gputrain(train_args);
  ASSERT_EQ(planned.exit_code, 2) << planned.out << planned.err;
  ASSERT_EQ(resumed.exit_code, 2) << resumed.err;
  const nlohmann::json report = nlohmann::json::parse(planned.out);
  ASSERT_EQ(report["problems"].size(), 1u) << report["problems"].dump(1);
  const std::string listed = report["problems"][0].get<std::string>();
  EXPECT_NE(listed.find("lies beyond train.epochs (1)"), std::string::npos) << listed;
  EXPECT_EQ(error_line(resumed.err), listed) << resumed.err;
}

// Issue 56 #2, the issue's command as a user types it in a checkout: the
// config's problem first, then the GPU and the data, which the config's
// problem hid before; exit 2.
TEST(PlanCommand, ListsTheConfigsProblemAndThenTheDevicesAndTheData) {
  const TempDir dir("plan56");
  // The checkout's configs/, and runs/ of this directory rather than the checkout's.
  fs::create_directory_symlink(fs::path(testing::kSourceDir) / "configs", dir.path() / "configs");
  const ProcessResult planned = run_gputrain({"plan", "--config", "configs/cifar10.yaml", "--set", "device=cuda",
                                              "--set", "train.accumulation_steps=3", "--set", "data.root=/nonexistent"},
                                             {}, dir.path().string());
  const std::string out = planned.out;
  if (out.find("- cuda:0") != std::string::npos) GTEST_SKIP() << "needs a machine without CUDA";
  EXPECT_EQ(planned.exit_code, 2) << planned.err;
  const std::size_t heading = out.find("3 problems that would stop train:");
  ASSERT_NE(heading, std::string::npos) << out;
  const std::size_t accumulation = out.find("configs/cifar10.yaml:", heading);  // at its line and column in the file
  const std::size_t gpu = out.find("--set #1 (device=cuda): device: 'cuda' was requested but CUDA is not available");
  const std::size_t data = out.find("data.root '/nonexistent' is not a directory");
  ASSERT_NE(accumulation, std::string::npos) << out;
  EXPECT_NE(out.find("data.batch_size: 128 is not divisible by train.accumulation_steps (3)", accumulation),
            std::string::npos)
      << out;
  ASSERT_NE(gpu, std::string::npos) << out;
  ASSERT_NE(data, std::string::npos) << out;
  EXPECT_LT(accumulation, gpu) << "the config's problems come first";
  EXPECT_LT(gpu, data);
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << "plan creates nothing";
}

}  // namespace
}  // namespace gputrain
