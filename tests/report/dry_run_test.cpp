// `gputrain plan`: what train would decide, and every problem that would stop
// it, found without training.
#include "gputrain/report/dry_run.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>

#include "gputrain/data/export.h"
#include "gputrain/data/generate.h"
#include "gputrain/plan/start.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/train/trainer.h"
#include "support/paths.h"
#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

using gputrain::testing::TempDir;
using gputrain::testing::write_text;

const char* const kMlp = R"(name: mlp
seed: 3
device: cpu
data: {dataset: synthetic, samples: 100, test_samples: 20, features: 8, classes: 3, batch_size: 32,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [16]}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
train: {epochs: 1, accumulation_steps: 2}
)";

class DryRunTest : public ::testing::Test {
 protected:
  // What `gputrain plan --config exp.yaml --set ...` asks.
  plan::StartRequest request(const std::string& yaml, std::vector<std::string> overrides = {}) {
    plan::StartRequest request;
    request.command = "plan";
    request.config_files = {write_text(dir_ / "exp.yaml", yaml).string()};
    overrides.insert(overrides.begin(), "output.dir=" + (dir_ / "runs").string());
    request.overrides = overrides;
    return request;
  }
  DryRun plan(const std::string& yaml, std::vector<std::string> overrides = {},
              std::optional<int64_t> nproc = std::nullopt) {
    plan::StartRequest asked = request(yaml, std::move(overrides));
    asked.nproc = nproc;
    return dry_run(plan::collect_start(asked));
  }

  TempDir dir_{"plan"};
};

bool contains(const nlohmann::ordered_json& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const auto& line) {
    return line.template get<std::string>().find(text) != std::string::npos;
  });
}

TEST_F(DryRunTest, SaysWhatTrainWouldDecide) {
  const DryRun p = plan(kMlp);
  EXPECT_TRUE(p.problems.empty()) << p.problems.front();
  const auto& r = p.report;
  EXPECT_EQ(r["devices"]["selected"], nlohmann::ordered_json::array({"cpu"}));
  EXPECT_EQ(r["strategy"]["kind"], "single");
  // 32 per step in micro-batches of 16: 100 samples make 7 micro-batches (the last of 4), so 4 steps.
  EXPECT_EQ(r["batch"]["per_optimizer_step"], 32);
  EXPECT_EQ(r["batch"]["micro_batch_size"], 16);
  EXPECT_EQ(r["batch"]["last_micro_batch"], 4);
  EXPECT_EQ(r["batch"]["steps_per_epoch"], 4);
  EXPECT_EQ(r["data"]["train_samples"], 100);
  EXPECT_EQ(r["data"]["on_disk"], "generated in memory");
  EXPECT_TRUE(contains(r["fast_paths"], "optim.fused: on (auto: "));
  EXPECT_TRUE(contains(r["fast_paths"], "train.threads: 1 (auto: "));
  EXPECT_TRUE(contains(r["fast_paths"], "data.device_cache: on (auto: "));
  EXPECT_TRUE(contains(r["fast_paths"], "data.device_cache for the test split: on (auto: "));
  // MLP 8 -> 16 -> 3: 195 float32 weights, as many gradients and momentum buffers.
  EXPECT_EQ(r["memory"]["parameter_bytes"], 195 * 4);
  EXPECT_EQ(r["memory"]["gradient_bytes"], 195 * 4);
  EXPECT_EQ(r["memory"]["optimizer_state_bytes"], 195 * 4);
  // The layers' outputs for 16 samples: Linear 16x16, ReLU 16x16, Linear 16x3.
  EXPECT_EQ(r["memory"]["activation_bytes"], (16 * 16 + 16 * 16 + 16 * 3) * 4);
  EXPECT_TRUE(contains(r["memory"]["per_device"], "cpu: "));
  EXPECT_EQ(r["outputs"]["run_directory"], (dir_ / "runs" / "mlp").string());
  const std::string text = format_dry_run(p);
  EXPECT_NE(text.find("batch:\n  per_optimizer_step: 32\n"), std::string::npos) << text;
  EXPECT_NE(text.find("no problems: train would start"), std::string::npos);
}

TEST_F(DryRunTest, AdamHoldsTwoMomentsAndTheMicroBatchFormShowsBothNumbers) {
  const DryRun p = plan(kMlp, {"optim.name=adam", "data.micro_batch_size=8", "data.batch_size=16"});
  ASSERT_TRUE(p.problems.empty()) << p.problems.front();
  EXPECT_EQ(p.report["memory"]["optimizer_state_bytes"], 2 * 195 * 4);
  EXPECT_EQ(p.report["batch"]["per_optimizer_step"], 16);
  EXPECT_EQ(p.report["batch"]["micro_batch_size"], 8);
  EXPECT_EQ(p.report["batch"]["stated_as"], "data.micro_batch_size");
}

TEST_F(DryRunTest, WorkersUnderNprocEachHaveTheirShare) {
  const DryRun p = plan(kMlp, {"strategy=ddp", "data.micro_batch_size=8"}, 2);
  ASSERT_TRUE(p.problems.empty()) << p.problems.front();
  // 8 per forward pass in each of 2 processes, 2 accumulation steps: 32 per optimizer step.
  EXPECT_EQ(p.report["batch"]["per_optimizer_step"], 32);
  EXPECT_EQ(p.report["batch"]["processes"], 2);
  EXPECT_EQ(p.report["batch"]["micro_batch"], 16);
  EXPECT_EQ(p.report["strategy"]["kind"], "ddp");
  EXPECT_EQ(p.report["strategy"]["ranks"], nlohmann::ordered_json::array({"rank 0: cpu", "rank 1: cpu"}));
  EXPECT_EQ(p.report["batch"]["full_split"], nlohmann::ordered_json::array({"rank 0: 8", "rank 1: 8"}));
}

// Issue 20 #2: every problem at once, each with where and a fix, not just the first.
TEST_F(DryRunTest, ListsEveryProblemThatWouldStopTrain) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "needs a machine without CUDA";
  // A finished run in the run directory, and a checkpoint directory holding a foreign file.
  write_text(dir_ / "runs" / "cnn" / "model.pt", "weights");
  write_text(dir_ / "runs" / "cnn" / "checkpoints" / "notes.txt", "mine");
  const DryRun p = plan(R"(name: cnn
device: auto
gpus: [1]
data: {dataset: cifar10, root: /nonexistent/cifar}
model: {name: cifar10_cnn}
train: {amp: fp16}
)");
  const auto& problems = p.problems;
  ASSERT_EQ(problems.size(), 5u) << format_dry_run(p);
  EXPECT_NE(problems[0].find("exp.yaml:3:7: gpus: selects GPUs, but the run is on the CPU"), std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("exp.yaml:6:14: train.amp"), std::string::npos) << problems[1];
  EXPECT_NE(problems[2].find("/nonexistent/cifar"), std::string::npos) << problems[2];
  EXPECT_NE(problems[3].find("notes.txt"), std::string::npos) << problems[3];
  EXPECT_NE(problems[4].find("holds a finished run"), std::string::npos) << problems[4];
  EXPECT_NE(problems[4].find("--resume auto"), std::string::npos);
  // What could still be decided is said.
  EXPECT_EQ(p.report["devices"]["selected"], nlohmann::ordered_json::array({"cpu"}));
  EXPECT_FALSE(p.report.contains("batch")) << "no data set, no batch layout";
  EXPECT_NE(format_dry_run(p).find("5 problems that would stop train:\n  - "), std::string::npos);
}

// Issue 62 #4: a batchnorm layer after a linear one has no statistics for a
// training batch of 1 sample; plan lists it (measuring no such step) instead
// of crashing on it, and names a last batch of 1 that train would stop at.
TEST_F(DryRunTest, ABatchnormBatchOfOneSampleIsAProblemNotACrash) {
  std::string yaml = kMlp;
  yaml.replace(yaml.find("{name: mlp, hidden: [16]}"), std::string("{name: mlp, hidden: [16]}").size(),
               "{layers: [{type: linear, out_features: 8}, batchnorm, relu, linear]}");
  const DryRun every = plan(yaml, {"data.batch_size=1", "train.accumulation_steps=1"});
  ASSERT_EQ(every.problems.size(), 1u) << format_dry_run(every);
  EXPECT_NE(every.problems[0].find("--set #2 (data.batch_size=1)"), std::string::npos) << every.problems[0];
  EXPECT_NE(every.problems[0].find("data.batch_size: every training forward pass gets 1 sample, but batchnorm "
                                   "layer 'bn1' normalises one value per channel of each sample"),
            std::string::npos)
      << every.problems[0];
  const DryRun last = plan(yaml, {"data.samples=64", "data.batch_size=63", "train.accumulation_steps=1"});
  ASSERT_EQ(last.problems.size(), 1u) << format_dry_run(last);
  EXPECT_NE(last.problems[0].find("64 training samples in batches of 63 leave a last batch of 1 sample"),
            std::string::npos)
      << last.problems[0];
  EXPECT_NE(last.problems[0].find("set data.drop_last: true"), std::string::npos) << last.problems[0];
  const DryRun dropped =
      plan(yaml, {"data.samples=64", "data.batch_size=63", "train.accumulation_steps=1", "data.drop_last=true"});
  EXPECT_TRUE(dropped.problems.empty()) << format_dry_run(dropped);
  // data.batch_size: auto measures its smallest micro-batch, of 1, first: on 2 rows here.
  const DryRun solved = plan(yaml, {"data.batch_size=auto", "train.target_batch=8", "train.accumulation_steps=1"});
  EXPECT_TRUE(solved.problems.empty()) << format_dry_run(solved);
  EXPECT_EQ(solved.report["batch"]["per_optimizer_step"], 8) << format_dry_run(solved);
}

// A file where a directory of output.dir should be is named as such, not as a permission problem.
TEST_F(DryRunTest, AFileInTheOutputPathIsNamed) {
  write_text(dir_ / "taken", "a file");
  const DryRun p = plan(kMlp, {"output.dir=" + (dir_ / "taken" / "runs").string()});
  ASSERT_FALSE(p.problems.empty()) << format_dry_run(p);
  EXPECT_TRUE(
      contains(p.problems, (dir_ / "taken").string() + " is a file, not a directory; choose another output.dir"))
      << format_dry_run(p);
}

// Issue 37 (weak): plan named no problem while a running train held the run
// directory's lock, which train would then refuse.
TEST_F(DryRunTest, ARunningRunInTheRunDirectoryIsAProblem) {
  const std::string held = "is running in this run directory";
  EXPECT_FALSE(contains(plan(kMlp).problems, held));
  {
    const report::RunDirLock running(dir_ / "runs" / "mlp");
    const DryRun p = plan(kMlp);
    EXPECT_TRUE(contains(p.problems, (dir_ / "runs" / "mlp").string() + ": another gputrain process (pid " +
                                         std::to_string(::getpid()) + ") " + held))
        << format_dry_run(p);
  }
  EXPECT_FALSE(contains(plan(kMlp).problems, held)) << "the lock ends with its run";
}

// Issue 37 #3, #4: an empty split, and splits that disagree, are problems
// named by file, found before the step-memory probe or an epoch runs.
TEST_F(DryRunTest, AnEmptySplitAndSplitsThatDisagreeAreProblems) {
  const auto arrays = [&](const std::string& name, const torch::Tensor& train_inputs, const torch::Tensor& test_inputs,
                          const torch::Tensor& test_targets) {
    const auto root = dir_ / name;
    std::filesystem::create_directories(root);
    data::write_npy(root / "train_inputs.npy", train_inputs);
    data::write_npy(root / "train_targets.npy", torch::zeros({train_inputs.size(0)}, torch::kInt64));
    data::write_npy(root / "test_inputs.npy", test_inputs);
    data::write_npy(root / "test_targets.npy", test_targets);
    return std::vector<std::string>{"data.dataset=npy", "data.root=" + root.string(), "data.batch_size=auto",
                                    "train.accumulation_steps=1", "train.target_batch=4"};
  };
  const torch::Tensor labels = torch::zeros({4}, torch::kInt64);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {arrays("empty", torch::zeros({0, 8}), torch::zeros({4, 8}), labels),
       "empty/train_inputs.npy: holds no samples (shape (0, 8)); the training split needs at least one"},
      {arrays("empty_test", torch::zeros({4, 8}), torch::zeros({0, 8}), torch::zeros({0}, torch::kInt64)),
       "empty_test/test_inputs.npy: holds no samples"},
      {arrays("features", torch::zeros({4, 8}), torch::zeros({4, 9}), labels),
       "features/train_inputs.npy holds features of [8] but " + (dir_ / "features").string() +
           "/test_inputs.npy holds features of [9]"},
      {arrays("images", torch::zeros({4, 1, 4, 4}, torch::kUInt8), torch::zeros({4, 5, 5}, torch::kUInt8), labels),
       "holds uint8 images of [1, 4, 4] but"},
      {arrays("targets", torch::zeros({4, 8}), torch::zeros({4, 8}), torch::zeros({4})),
       "holds integer class labels but " + (dir_ / "targets").string() +
           "/test_targets.npy holds float regression targets, 1 a sample"},
  };
  for (const auto& [sets, expected] : cases) {
    const DryRun p = plan(kMlp, sets);
    ASSERT_EQ(p.problems.size(), 1u) << format_dry_run(p);
    EXPECT_NE(p.problems[0].find(expected), std::string::npos) << p.problems[0];
  }
}

// `plan --resume` plans what `train --resume` runs: the checkpoint's config and
// batch when there is a checkpoint; a fresh start, and what stops one, when there is none.
TEST_F(DryRunTest, ResumingPlansWhatTrainResumeWouldRun) {
  // A finished run (its model.pt) without checkpoints: train --resume auto would start afresh over it.
  write_text(dir_ / "runs" / "mlp" / "model.pt", "weights");
  plan::StartRequest asked = request(kMlp);
  asked.resume = "auto";
  const DryRun fresh = dry_run(plan::collect_start(asked));
  ASSERT_EQ(fresh.problems.size(), 1u) << format_dry_run(fresh);
  EXPECT_NE(fresh.problems[0].find("holds a finished run"), std::string::npos) << fresh.problems[0];

  // data.batch_size: auto measured 96 in micro-batches of 24 under a budget of 5700 bytes (as the test below),
  // and the run checkpointed its epoch.
  const std::vector<std::string> autobatch{"data.batch_size=auto", "train.accumulation_steps=1",
                                           "train.target_batch=96", "train.max_memory=5700", "name=auto"};
  plan::StartRequest trained = request(kMlp, autobatch);
  trained.purpose = plan::Purpose::kTrain;
  const plan::Start start = plan::start_run(trained);
  train::Trainer trainer(start.run);
  train::ObserverList quiet;
  train::FitOptions options;
  options.checkpoint_dir = dir_ / "runs" / "auto" / "checkpoints";
  trainer.fit(quiet, options);

  // Resumed with the memory budget of a 32-sample step, which measured afresh would choose micro-batches of 32.
  std::vector<std::string> resumed_sets = autobatch;
  resumed_sets.push_back("train.max_memory=7000");
  resumed_sets.push_back("train.epochs=2");
  asked = request(kMlp, resumed_sets);
  asked.resume = "auto";
  const DryRun resumed = dry_run(plan::collect_start(asked));
  ASSERT_TRUE(resumed.problems.empty()) << format_dry_run(resumed);
  EXPECT_EQ(resumed.report["batch"]["per_optimizer_step"], 96);
  EXPECT_EQ(resumed.report["batch"]["micro_batch"], 24) << "the checkpoint's batch, as train --resume runs it";
  asked.resume.clear();
  const DryRun afresh = dry_run(plan::collect_start(asked));
  ASSERT_TRUE(afresh.problems.empty()) << format_dry_run(afresh);
  EXPECT_NE(afresh.report["batch"]["micro_batch"], 24) << "measured afresh";
}

// Issue 56 #2: the config's problems first, then what can still be checked
// with the config falling back where they are: the devices and the data.
TEST_F(DryRunTest, ConfigProblemsComeFirstAndTheRestIsStillChecked) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "needs a machine without CUDA";
  plan::StartRequest asked;
  asked.command = "plan";
  asked.config_files = {(std::filesystem::path(testing::kSourceDir) / "configs" / "cifar10.yaml").string()};
  asked.overrides = {"device=cuda", "train.accumulation_steps=3", "data.root=/nonexistent",
                     "output.dir=" + (dir_ / "runs").string()};
  const DryRun p = dry_run(plan::collect_start(asked));
  ASSERT_EQ(p.problems.size(), 3u) << format_dry_run(p);
  EXPECT_NE(p.problems[0].find("cifar10.yaml:"), std::string::npos) << p.problems[0];
  EXPECT_NE(p.problems[0].find(": data.batch_size: 128 is not divisible by train.accumulation_steps (3)"),
            std::string::npos)
      << p.problems[0];
  EXPECT_NE(p.problems[1].find("--set #1 (device=cuda): device: "), std::string::npos) << p.problems[1];
  EXPECT_NE(p.problems[2].find("/nonexistent"), std::string::npos) << p.problems[2];
  EXPECT_EQ(p.report["config"]["name"], "cifar10-seed");
  EXPECT_EQ(p.report["devices"]["selected"], nlohmann::ordered_json::array({"cpu"})) << "the CPU stands in";
}

TEST_F(DryRunTest, AConfigThatCannotBeParsedIsTheOneProblem) {
  const DryRun p = plan("data: {batch_size: [\n");
  ASSERT_EQ(p.problems.size(), 1u) << format_dry_run(p);
  EXPECT_NE(p.problems[0].find("exp.yaml:"), std::string::npos) << p.problems[0];
  EXPECT_FALSE(p.report.contains("devices"));
}

// MLP 8 -> 16 -> 3 under SGD with momentum: 3 x 195 x 4 = 2340 bytes of weights, gradients and momentum, and
// 140 bytes of layer outputs per sample, so a budget of 5700 bytes holds a step of 24 samples but not of 32.
TEST_F(DryRunTest, AnAutoBatchShowsTheChoiceTrainWouldMake) {
  const std::vector<std::string> autobatch{"data.batch_size=auto", "train.accumulation_steps=1",
                                           "train.target_batch=96"};
  std::vector<std::string> overrides = autobatch;
  overrides.push_back("train.max_memory=5700");
  const DryRun p = plan(kMlp, overrides);
  EXPECT_TRUE(p.problems.empty()) << p.problems.front();
  const auto& batch = p.report["batch"];
  EXPECT_EQ(batch["per_optimizer_step"], 96);
  EXPECT_EQ(batch["micro_batch_size"], 24);
  EXPECT_EQ(batch["accumulation_steps"], 4);
  EXPECT_EQ(batch["stated_as"], "data.batch_size: auto");
  EXPECT_NE(batch["chosen"].get<std::string>().find("micro-batch 24 x 4 accumulation steps = 96 per optimizer step"),
            std::string::npos)
      << batch["chosen"];
  EXPECT_EQ(p.report["memory"]["activation_bytes"], 24 * 140);

  overrides = autobatch;
  overrides.push_back("train.max_memory=2000");
  const DryRun tight = plan(kMlp, overrides);
  ASSERT_EQ(tight.problems.size(), 1u);
  EXPECT_NE(tight.problems[0].find("data.batch_size: even a micro-batch of 1 sample does not fit"), std::string::npos)
      << tight.problems[0];
}

// A step larger than the host's memory is not run to be measured: on the CPU
// that is the kernel ending plan (exit 137; 3000 x 3000 images took 25 GB). A
// step of 2 samples, scaled to the micro-batch of 16, says it does not fit.
TEST_F(DryRunTest, MemoryBeyondWhatIsFreeIsAProblem) {
  plan::StartRequest asked = request(kMlp);
  asked.meminfo = write_text(dir_ / "meminfo", "MemTotal: 4 kB\nMemAvailable: 1 kB\n").string();
  const DryRun p = dry_run(plan::collect_start(asked));
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_NE(p.problems[0].find("memory: one step needs about"), std::string::npos) << p.problems[0];
  EXPECT_NE(p.problems[0].find("on cpu"), std::string::npos);
  EXPECT_NE(p.problems[0].find("more than its 1.0 KiB free"), std::string::npos) << p.problems[0];
  const std::string measured = p.report["memory"]["activations_measured"];
  EXPECT_NE(measured.find("of 2 samples, scaled (a step of 16 would not fit the host's memory, so it was not run)"),
            std::string::npos)
      << measured;
  EXPECT_EQ(p.report["memory"]["activation_bytes"], 16 * 140);  // 8 -> 16 -> 3 floats a sample, as measured
}

}  // namespace
}  // namespace gputrain::report
