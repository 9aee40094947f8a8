// `gputrain sweep` end to end: one train child per seed and --vary value, the
// table with mean and standard deviation, the sweep record, bad input.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

class Sweep : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = write_text(dir_ / "s.yaml", R"(
name: s
device: cpu
data: {dataset: synthetic, samples: 64, test_samples: 32, features: 4, classes: 2, batch_size: 16, num_workers: 0}
model: {name: mlp, hidden: [8]}
optim: {name: sgd, lr: 0.1}
train: {epochs: 2, target_accuracy: 0.01, tensorboard: false}
checkpoint: {every: 0}
)");
  }
  ProcessResult sweep(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"sweep", "--config", config_.string(), "--set",
                                  "output.dir=" + (dir_ / "runs").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_gputrain(args);
  }
  TempDir dir_;
  std::filesystem::path config_;
};

TEST_F(Sweep, RunsEverySeedAndValueAndSummarisesThem) {
  const ProcessResult r = sweep({"--seeds", "0..1", "--vary", "optim.lr=0.05,0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optim.lr=0.05"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test accuracy: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(n=4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("target reached in 4 of 4 runs"), std::string::npos) << r.out;
  for (int run = 1; run <= 4; ++run) {
    EXPECT_TRUE(std::filesystem::exists(dir_ / "runs" / ("s-sweep-" + std::to_string(run)) / "model.pt")) << run;
  }
  std::ifstream in(dir_ / "runs" / "s-sweep.json");
  const auto record = nlohmann::json::parse(in);
  ASSERT_EQ(record["runs"].size(), 4u);
  EXPECT_EQ(record["runs"][1]["seed"], 1);
  EXPECT_EQ(record["runs"][2]["varied"][0], "optim.lr=0.1");
  EXPECT_EQ(record["runs"][3]["result"]["steps"], 4) << "each run stops at its first evaluation, epoch 1's end";
  EXPECT_EQ(record["summary"]["time_to_target_s"]["n"], 4);
  // End to end: each run's process, timed by the sweep, holds its training (and its start before it), and the
  // train result line counts from its process's start, which began before fit() did.
  ASSERT_TRUE(record["summary"].contains("process_wall_s")) << record["summary"].dump();
  EXPECT_EQ(record["summary"]["process_wall_s"]["n"], 4);
  for (const auto& run : record["runs"]) {
    const auto& result = run["result"];
    ASSERT_TRUE(run["process_wall_s"].is_number()) << run.dump();
    ASSERT_TRUE(result["process_s"].is_number()) << result.dump();
    ASSERT_TRUE(result["time_to_target_process_s"].is_number()) << result.dump();
    EXPECT_GT(run["process_wall_s"].get<double>(), result["elapsed_s"].get<double>()) << run.dump();
    EXPECT_GT(result["process_s"].get<double>(), result["elapsed_s"].get<double>()) << result.dump();
    EXPECT_GT(result["time_to_target_process_s"].get<double>(), result["time_to_target_wall_s"].get<double>())
        << result.dump();
  }
}

// The record is rewritten after each run: a sweep killed part-way (SIGKILL at a job's time limit, which
// nothing can catch) still leaves the runs that ended.
TEST_F(Sweep, RecordsEachRunAsItEnds) {
  const std::filesystem::path runs = dir_ / "runs";
  GputrainProcess sweep({"sweep", "--config", config_.string(), "--seeds", "0", "--vary", "train.epochs=1,1000000",
                         "--set", "output.dir=" + runs.string(), "--set", "train.target_accuracy=0", "--set",
                         "train.log_every=1"});
  const std::filesystem::path second = runs / "s-sweep-2" / "metrics.jsonl";
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(second) && std::filesystem::file_size(second) > 0; }))
      << sweep.err_so_far();
  std::ifstream in(runs / "s-sweep.json");
  ASSERT_TRUE(in.good()) << "run 1 ended, run 2 is training: no record yet\n" << sweep.err_so_far();
  const auto record = nlohmann::json::parse(in);
  ASSERT_EQ(record["runs"].size(), 1u);
  EXPECT_EQ(record["runs"][0]["exit_code"], 0);
  EXPECT_EQ(record["runs"][0]["result"]["epochs"], 1);
  EXPECT_TRUE(record["runs"][0]["process_wall_s"].is_number());
  sweep.send(SIGTERM);  // passed on to run 2, which stops: nothing outlives the test's directory
  EXPECT_EQ(sweep.wait().exit_code, 130);
}

TEST_F(Sweep, BadSeedsOrValuesExitTwoBeforeAnyRun) {
  for (const auto& extra : std::vector<std::vector<std::string>>{{"--seeds", "3..1"},
                                                                 {"--seeds", "a,b"},
                                                                 {"--seeds", "0", "--vary", "optim.lr"},
                                                                 {"--seeds", "0", "--vary", "train.epochs=1,0"}}) {
    const ProcessResult r = sweep(extra);
    EXPECT_EQ(r.exit_code, 2) << extra[1] << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "runs")) << r.err;
  }
}

// A stop signal reaches the running `train`, which checkpoints; the sweep
// then ends as `train` would, naming the run and how to continue it.
TEST_F(Sweep, PassesAStopSignalOnToTheRunningTrainAndExitsAsItWould) {
  const std::map<std::string, std::string> env{{"OMP_NUM_THREADS", "1"}};
  for (const auto& [signal, code, name] : std::vector<std::tuple<int, int, std::string>>{
           {SIGTERM, 130, "SIGTERM"}, {SIGUSR1, 75, "SIGUSR1"}, {SIGINT, 130, "SIGINT"}}) {
    const std::filesystem::path runs = dir_ / ("runs-" + name);
    GputrainProcess sweep(
        {"sweep", "--config", config_.string(), "--seeds", "0..1", "--set", "output.dir=" + runs.string(), "--set",
         "train.epochs=1000000", "--set", "train.target_accuracy=0", "--set", "train.log_every=1"},
        env);
    const std::filesystem::path metrics = runs / "s-sweep-1" / "metrics.jsonl";
    ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(metrics) && std::filesystem::file_size(metrics) > 0; }))
        << sweep.err_so_far();
    sweep.send(signal);
    const ProcessResult r = sweep.wait();
    EXPECT_EQ(r.exit_code, code) << name << "\n" << r.err;
    EXPECT_NE(r.err.find(name + " stopped sweep run 1 of 2 (seed 0); its checkpoint is "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("continue that run with gputrain train --resume "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("run 2 did not run"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(runs / "s-sweep-2")) << r.err;
    // The run stopped at a step boundary and saved where it was; the record keeps it.
    std::ifstream in(runs / "s-sweep.json");
    const auto record = nlohmann::json::parse(in);
    ASSERT_EQ(record["runs"].size(), 1u);
    EXPECT_EQ(record["runs"][0]["exit_code"], code);
    const std::string checkpoint = record["runs"][0]["result"]["checkpoint"];
    EXPECT_TRUE(std::filesystem::exists(checkpoint)) << checkpoint;
  }
}

// The same sweep again into the same output.dir: refused before any run, with
// the finished sweep's runs and record as they were (its first run was refused,
// and the record replaced by one of that refusal).
TEST_F(Sweep, TheSameSweepAgainIsRefusedLeavingTheFinishedOnesRecord) {
  ASSERT_EQ(sweep({"--seeds", "0..1"}).exit_code, 0);
  const std::filesystem::path record = dir_ / "runs" / "s-sweep.json";
  const std::string before = read_text(record);
  const ProcessResult r = sweep({"--seeds", "0..1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("s-sweep-1: holds a finished run (its model.pt), so this sweep has run here before"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("sweep run 1 of 2"), std::string::npos) << "no run started: " << r.err;
  EXPECT_EQ(read_text(record), before);
}

}  // namespace
}  // namespace gputrain::testing
