// dp on CPU replica threads: the same code path as on GPUs.
#include <gtest/gtest.h>

#include <sstream>

#include "gputrain/config/load.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/train/trainer.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::parallel {
namespace {

config::LoadedConfig cfg(const std::vector<std::string>& overrides) {
  return config::load_config_text(R"(
seed: 5
device: cpu
data: {dataset: synthetic, samples: 200, test_samples: 50, features: 6, classes: 3, batch_size: 30, num_workers: 0,
       pin_memory: false}
model: {name: mlp, hidden: [12]}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
train: {epochs: 2, log_every: 1000}
)",
                                  "dp.yaml", overrides);
}

torch::nn::Sequential train(const std::vector<std::string>& overrides) {
  train::Trainer trainer(cfg(overrides), device::DevicePlan{});
  train::TrainObserver quiet;
  trainer.fit(quiet);
  return trainer.model();
}

TEST(DataParallel, TwoCpuReplicasMatchOneDevice) {
  const auto single = train({"strategy=single"});
  const auto dp = train({"strategy=dp", "dp.replicas=2"});
  const auto p = single->parameters();
  const auto q = dp->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::allclose(p[i], q[i], 1e-5, 1e-6)) << i;
}

TEST(StrategyPlan, AutoAndExplicitChoices) {
  const device::DevicePlan cpu;
  EXPECT_EQ(plan_strategy(cfg({}), cpu, {}).kind, StrategyKind::kSingle);
  EXPECT_EQ(plan_strategy(cfg({"strategy=dp", "dp.replicas=3"}), cpu, {}).replicas.size(), 3u);
  LaunchInfo launched;
  launched.world_size = 2;
  EXPECT_EQ(plan_strategy(cfg({}), cpu, launched).kind, StrategyKind::kDistributed);
  EXPECT_THROW(plan_strategy(cfg({"strategy=dp"}), cpu, launched), ConfigError);

  device::DevicePlan two_gpus;
  two_gpus.kind = device::DeviceKind::kCuda;
  two_gpus.gpus = {0, 1};
  const StrategyPlan auto_dp = plan_strategy(cfg({"device=cuda"}), two_gpus, {});
  EXPECT_EQ(auto_dp.kind, StrategyKind::kDataParallel);
  EXPECT_EQ(auto_dp.replicas, (std::vector<torch::Device>{torch::Device("cuda:0"), torch::Device("cuda:1")}));
  EXPECT_THROW(plan_strategy(cfg({"device=cuda", "strategy=dp", "dp.replicas=3"}), two_gpus, {}), ConfigError);
  launched.local_rank = 1;
  EXPECT_EQ(plan_strategy(cfg({"device=cuda"}), two_gpus, launched).replicas.front(), torch::Device("cuda:1"));
}

// The message part of each log line: what follows "[info] ".
std::vector<std::string> messages(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("[info] ");
    if (at != std::string::npos) out.push_back(line.substr(at + 7));
  }
  return out;
}

TEST(DataParallel, SeedEightGpuLogReproducedLineForLine) {
  testing::TempDir dir;
  const auto r = testing::run_gputrain({"train", "--config", "configs/seed_dataparallel.yaml", "--output",
                                        dir.path().string(), "--set", "device=cpu", "--set", "dp.replicas=8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> expected{"Let's use 8 CPU replicas!"};
  for (int batch = 0; batch < 3; ++batch) {
    for (int i = 0; i < 7; ++i) expected.push_back("\tIn Model: input size [4, 5] output size [4, 2]");
    expected.push_back("\tIn Model: input size [2, 5] output size [2, 2]");
    expected.push_back("Outside: input size [30, 5] output_size [30, 2]");
  }
  for (int i = 0; i < 5; ++i) expected.push_back("\tIn Model: input size [2, 5] output size [2, 2]");
  expected.push_back("Outside: input size [10, 5] output_size [10, 2]");

  std::vector<std::string> seen;
  for (const auto& m : messages(r.err)) {
    if (m.rfind("Let's use", 0) == 0 || m.find("In Model:") != std::string::npos || m.rfind("Outside:", 0) == 0) {
      seen.push_back(m);
    }
  }
  EXPECT_EQ(seen, expected);
}

}  // namespace
}  // namespace gputrain::parallel
