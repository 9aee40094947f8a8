// The shipped time-to-accuracy recipes, end to end on generated data (the real
// sets are not part of the suite, so only their mechanics are checked here):
// every technique they set runs on the CPU, the run stops at its target, and
// run.json gives the time it took.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

class Recipes : public ::testing::Test {
 protected:
  // Two short epochs of `config` on `data_root`, the average from epoch 1 so
  // that both evaluations use it, and a target the first one reaches.
  nlohmann::json train_recipe(const std::string& config, const std::filesystem::path& data_root) {
    const ProcessResult r =
        run_gputrain({"train", "--config", config, "--output", (dir_ / "runs").string(), "--set", "device=cpu", "--set",
                      "data.root=" + data_root.string(), "--set", "data.batch_size=16", "--set", "train.epochs=2",
                      "--set", "train.ema.start_epoch=1", "--set", "train.target_accuracy=0.01"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("reached train.target_accuracy"), std::string::npos) << r.err;
    std::filesystem::path run_dir;
    for (const auto& entry : std::filesystem::directory_iterator(dir_ / "runs")) run_dir = entry.path();
    std::ifstream in(run_dir / "run.json");
    return nlohmann::json::parse(in);
  }
  void generate(const std::string& command, const std::filesystem::path& out) {
    const ProcessResult r = run_gputrain({"datasets", command, "--out", out.string(), "--train", "48", "--test", "16"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  TempDir dir_{"recipes"};
};

TEST_F(Recipes, Cifar10FastRunsEveryTechniqueAndStopsAtItsTarget) {
  generate("make-cifar", dir_ / "cifar");
  const nlohmann::json run = train_recipe("configs/cifar10_fast.yaml", dir_ / "cifar");
  ASSERT_TRUE(run["target_reached"].is_object()) << run.dump();
  EXPECT_EQ(run["target_reached"]["epoch"], 1);
  EXPECT_GT(run["target_reached"]["time_to_target_s"].get<double>(), 0);
}

TEST_F(Recipes, FashionMnistFastRunsEveryTechniqueAndStopsAtItsTarget) {
  generate("make-idx", dir_ / "fmnist");
  const nlohmann::json run = train_recipe("configs/fashion_mnist_fast.yaml", dir_ / "fmnist");
  ASSERT_TRUE(run["target_reached"].is_object()) << run.dump();
  EXPECT_EQ(run["target_reached"]["epoch"], 1);
  EXPECT_GT(run["target_reached"]["time_to_target_wall_s"].get<double>(),
            run["target_reached"]["time_to_target_s"].get<double>());
}

}  // namespace
}  // namespace gputrain::testing
