// `gputrain sweep` end to end: one train child per seed and --vary value, the
// table with mean and standard deviation, the sweep record, bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace gputrain::testing
