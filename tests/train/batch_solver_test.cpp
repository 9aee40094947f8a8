// data.batch_size: auto — the choice against made-up step costs, then the
// solver measuring real CPU steps against train.max_memory, and the run it
// chooses trained against the same settings written by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/data/dataset.h"
#include "gputrain/device/memory.h"
#include "gputrain/plan/batch_solver.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/train/trainer.h"

namespace gputrain::train {
namespace {

using plan::BatchChoice;
using plan::choose_batch;
using plan::micro_batch_candidates;
using plan::solve_batch;
using plan::StepMeasure;
using plan::StepMemory;
using plan::StepProbe;

// A step holding `fixed` bytes plus `per_sample` bytes of activations per sample.
struct LinearCost {
  int64_t fixed = 100;
  int64_t per_sample = 10;
  std::vector<int64_t> measured;

  std::optional<StepMemory> operator()(int64_t micro) {
    measured.push_back(micro);
    StepMemory memory;
    memory.parameters = fixed;
    memory.activations = per_sample * micro;
    return memory;
  }
};

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != l.npos; });
}

TEST(BatchChoice, CandidatesAreEveryEvenSplitOfTheTargetLargestFirst) {
  EXPECT_EQ(micro_batch_candidates(12, 1), (std::vector<int64_t>{12, 6, 4, 3, 2, 1}));
  EXPECT_EQ(micro_batch_candidates(12, 2), (std::vector<int64_t>{6, 3, 2, 1}));
  EXPECT_TRUE(micro_batch_candidates(10, 3).empty());
}

TEST(BatchChoice, TakesTheLargestMicroBatchThatFitsMeasuringOnlyThosePredictedToFit) {
  LinearCost cost;  // 100 + 10 per sample: 32 samples take 420 bytes, 48 take 580
  const BatchChoice choice = choose_batch(96, 1, 500, std::ref(cost));
  EXPECT_EQ(choice.micro_batch, 32);
  EXPECT_EQ(choice.accumulation, 3);
  EXPECT_EQ(choice.batch_size, 96);
  EXPECT_EQ(choice.step_bytes, 420);
  EXPECT_EQ(cost.measured, (std::vector<int64_t>{1, 32})) << "96 and 48 are predicted not to fit";
  EXPECT_TRUE(mentions(choice.refused, "96 would take about")) << choice.describe();
  EXPECT_TRUE(mentions(choice.refused, "48 would take about")) << choice.describe();
  EXPECT_NE(choice.describe().find("micro-batch 32 x 3 accumulation steps = 96 per optimizer step"), std::string::npos)
      << choice.describe();
}

TEST(BatchChoice, ProcessesEachTakeTheirShareOfTheTarget) {
  LinearCost cost;
  const BatchChoice choice = choose_batch(96, 2, 500, std::ref(cost));
  EXPECT_EQ(choice.micro_batch, 24);  // 48 per process: 48 (580 bytes) does not fit, 24 does
  EXPECT_EQ(choice.accumulation, 2);
  EXPECT_NE(choice.describe().find("over 2 processes"), std::string::npos) << choice.describe();
}

TEST(BatchChoice, BacksOffFromStepsThatRunOutOfMemory) {
  std::vector<int64_t> tried;
  const StepMeasure out_of_memory_above_20 = [&](int64_t micro) -> std::optional<StepMemory> {
    tried.push_back(micro);
    if (micro > 20) return std::nullopt;
    StepMemory memory;
    memory.activations = micro;
    return memory;
  };
  const BatchChoice choice = choose_batch(96, 1, -1, out_of_memory_above_20);
  EXPECT_EQ(choice.micro_batch, 16);
  EXPECT_EQ(choice.accumulation, 6);
  EXPECT_EQ(tried, (std::vector<int64_t>{1, 96, 48, 32, 24, 16}));
  EXPECT_EQ(std::count_if(choice.refused.begin(), choice.refused.end(),
                          [](const std::string& l) { return l.find("ran out of memory") != l.npos; }),
            4);
}

TEST(BatchChoice, AStepLargerThanPredictedIsRefusedAndTheNextTried) {
  LinearCost cost;
  const StepMeasure jump_at_32 = [&](int64_t micro) {
    std::optional<StepMemory> memory = cost(micro);
    if (micro >= 32) memory->activations += 200;  // 32: 620 bytes where 420 were predicted
    return memory;
  };
  const BatchChoice choice = choose_batch(96, 1, 500, jump_at_32);
  EXPECT_EQ(choice.micro_batch, 24);
  EXPECT_TRUE(mentions(choice.refused, "32 took")) << choice.describe();
}

TEST(BatchChoice, NothingFittingOrAnUnevenTargetIsAnError) {
  LinearCost cost;
  try {
    choose_batch(96, 1, 50, std::ref(cost));
    FAIL() << "a 50-byte budget fits nothing";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("even a micro-batch of 1 sample does not fit"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
  }
  EXPECT_THROW(choose_batch(10, 3, 500, std::ref(cost)), UserError);
}

constexpr const char* kMlp = R"(
seed: 5
device: cpu
data: {dataset: synthetic, samples: 96, test_samples: 24, features: 8, classes: 3, batch_size: auto,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [16]}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
train: {epochs: 2, log_every: 100, target_batch: 48}
)";

std::shared_ptr<const data::Dataset> training_split(const config::LoadedConfig& loaded) {
  return data::make_dataset(loaded.config.data, data::Split::kTrain, loaded.config.seed);
}

parallel::StrategyPlan cpu_single() {
  parallel::StrategyPlan plan;
  plan.replicas = {torch::Device(torch::kCPU)};
  return plan;
}

struct Quiet : TrainObserver {};

std::vector<torch::Tensor> trained(const config::LoadedConfig& loaded) {
  Trainer trainer(plan::resolve_run(loaded, device::DevicePlan{}, {}));
  Quiet quiet;
  trainer.fit(quiet);
  std::vector<torch::Tensor> params;
  for (const auto& p : trainer.model()->parameters()) params.push_back(p.detach().clone());
  return params;
}

TEST(BatchSolver, ChoosesTheLargestMicroBatchWhoseMeasuredStepFitsTheBudgetAndTrainsAsSetByHand) {
  config::LoadedConfig probe_config = config::load_config_text(kMlp, "auto.yaml");
  const auto train_set = data::make_dataset(probe_config.config.data, data::Split::kTrain, 5);
  // What a step of each candidate micro-batch takes, measured the solver's way.
  std::map<int64_t, int64_t> step_bytes;
  for (const int64_t micro : micro_batch_candidates(48, 1)) {
    StepProbe probe(probe_config, plan::ModelInitPlan{}, train_set, cpu_single(), config::AmpMode::kOff, micro, 1);
    step_bytes[micro] = probe.measure(micro).total();
  }
  ASSERT_LT(step_bytes[12], step_bytes[16]);
  // A budget between 12's step and 16's.
  config::LoadedConfig loaded =
      config::load_config_text(kMlp, "auto.yaml", {fmt::format("train.max_memory={}", step_bytes[12] + 1)});
  const std::optional<BatchChoice> choice =
      solve_batch(loaded, plan::ModelInitPlan{}, train_set, cpu_single(), config::AmpMode::kOff, 1);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->micro_batch, 12);
  EXPECT_EQ(choice->accumulation, 4);
  EXPECT_EQ(choice->step_bytes, step_bytes[12]);
  EXPECT_EQ(choice->budget_source, "train.max_memory");
  // The choice is the plan's; the config stays as written (issue 38 #4).
  const plan::RunPlan run = plan::resolve_run(loaded, device::DevicePlan{}, parallel::LaunchInfo{});
  EXPECT_EQ(run.batch.global, 48);
  EXPECT_EQ(run.batch.accumulation, 4);
  EXPECT_EQ(run.batch.test, 12) << "evaluation in micro-batches known to fit";
  EXPECT_EQ(run.train_loader.batch_size, 12);
  EXPECT_EQ(run.test_loader.batch_size, 12);
  EXPECT_FALSE(run.loaded.config.data.batch_size);
  EXPECT_EQ(run.loaded.config.train.accumulation_steps, 1);
  EXPECT_EQ(run.loaded.config.data.test_batch_size, 0);
  EXPECT_EQ(config::dump_config(run.loaded.config), config::dump_config(loaded.config));
  // A stated batch is not measured.
  config::LoadedConfig given = config::load_config_text(kMlp, "auto.yaml", {"data.batch_size=48"});
  EXPECT_FALSE(
      solve_batch(given, plan::ModelInitPlan{}, train_set, cpu_single(), config::AmpMode::kOff, 1).has_value());

  const config::LoadedConfig by_hand = config::load_config_text(
      kMlp, "auto.yaml", {"data.batch_size=48", "train.accumulation_steps=4", "data.test_batch_size=12"});
  const auto a = trained(loaded);
  const auto b = trained(by_hand);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
}

TEST(BatchSolver, AutoOnTheCpuBudgetsHalfTheAvailableMemoryOverTheProcesses) {
  config::LoadedConfig loaded = config::load_config_text(kMlp, "auto.yaml");
  const auto train_set = data::make_dataset(loaded.config.data, data::Split::kTrain, 5);
  const std::string meminfo = ::testing::TempDir() + "batch_solver_meminfo";
  { std::ofstream(meminfo) << "MemTotal: 8000 kB\nMemAvailable: 4000 kB\n"; }
  const std::optional<BatchChoice> choice =
      solve_batch(loaded, plan::ModelInitPlan{}, train_set, cpu_single(), config::AmpMode::kOff, 2, meminfo);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->budget, 4000 * 1024 / 2 / 2);
  EXPECT_EQ(choice->micro_batch, 24) << "the whole per-process target fits in a megabyte";
  EXPECT_NE(choice->budget_source.find("half the host's"), std::string::npos) << choice->budget_source;

  { std::ofstream(meminfo) << "MemTotal: 8000 kB\n"; }
  config::LoadedConfig unknown = config::load_config_text(kMlp, "auto.yaml");
  try {
    solve_batch(unknown, plan::ModelInitPlan{}, train_set, cpu_single(), config::AmpMode::kOff, 1, meminfo);
    FAIL() << "no MemAvailable";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.max_memory"), std::string::npos) << e.what();
  }
}

TEST(BatchSolver, AStepThatFitsNoBudgetNamesTheKey) {
  config::LoadedConfig loaded = config::load_config_text(kMlp, "auto.yaml", {"train.max_memory=100B"});
  try {
    solve_batch(loaded, plan::ModelInitPlan{}, training_split(loaded), cpu_single(), config::AmpMode::kOff, 1);
    FAIL() << "100 bytes hold no step";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("auto.yaml:4:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
  }
}

// A budget beyond the GPU (10 TB) lets the estimate through, so the largest
// micro-batches really run out of device memory and the solver backs off.
TEST(BatchSolver, BacksOffFromARealOutOfMemoryOnTheGpu_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  config::LoadedConfig loaded = config::load_config_text(R"(
seed: 5
device: cuda
data: {dataset: synthetic, samples: 1048576, test_samples: 8, features: 8, classes: 3, batch_size: auto,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [32768]}
optim: {name: sgd, lr: 0.1}
train: {epochs: 1, target_batch: 1048576, max_memory: 10TB}
)",
                                                         "gpu.yaml");
  parallel::StrategyPlan gpu;
  gpu.replicas = {torch::Device(torch::kCUDA, 0)};
  const std::optional<BatchChoice> choice =
      solve_batch(loaded, plan::ModelInitPlan{}, training_split(loaded), gpu, config::AmpMode::kOff, 1);
  ASSERT_TRUE(choice.has_value());
  EXPECT_LT(choice->micro_batch, 1048576) << choice->describe();
  EXPECT_TRUE(mentions(choice->refused, "1048576 ran out of memory")) << choice->describe();
  EXPECT_EQ(choice->micro_batch * choice->accumulation, 1048576);
  EXPECT_LE(choice->step_bytes, device::memory_stats(gpu.replicas.front()).total);
}

TEST(BatchSolver, TheBatchKeysMustBeStatedOneWay) {
  const auto refused = [](std::vector<std::string> overrides, const std::string& key, const std::string& text) {
    try {
      config::load_config_text(kMlp, "auto.yaml", overrides);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  refused({"train.target_batch=0"}, "data.batch_size", "auto needs train.target_batch");
  refused({"data.micro_batch_size=8"}, "data.micro_batch_size",
          "train.target_batch is for data.batch_size: auto's measurement, which chooses the micro-batch");
  refused({"train.accumulation_steps=2"}, "train.accumulation_steps", "auto chooses the accumulation steps");
  refused({"data.batch_size=32"}, "train.target_batch", "48 disagrees with data.batch_size (32)");
  refused({"train.max_memory=lots"}, "train.max_memory", "'lots' is not a size");
  // The resolved config, as a checkpoint stores it, loads: the target agrees with the batch.
  EXPECT_NO_THROW(config::load_config_text(kMlp, "auto.yaml", {"data.batch_size=48", "train.accumulation_steps=4"}));
}

}  // namespace
}  // namespace gputrain::train
