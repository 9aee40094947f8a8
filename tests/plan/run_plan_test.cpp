// A run resolved once (issue 38): the devices, the processes, the strategy,
// the data and the batches in one place, for train, bench, test, predict and
// `gputrain plan` alike; `plan` collects every problem instead of the first.
#include "gputrain/plan/run_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/plan/saved_weights.h"
#include "support/machine.h"

namespace gputrain::plan {
namespace {

config::LoadedConfig run_config(const std::vector<std::string>& overrides = {}) {
  return config::load_config_text(R"(
seed: 3
data: {dataset: synthetic, samples: 100, test_samples: 20, features: 8, classes: 3, batch_size: 32,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [16]}
)",
                                  "exp.yaml", overrides);
}

using gputrain::testing::machine;

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST(RunPlan, ResolvesDevicesStrategyDataAndBatchesInOneCall) {
  const RunPlan run = resolve_run(run_config({"train.accumulation_steps=2"}), RunRequest{});
  EXPECT_EQ(run.devices.primary(), torch::Device("cpu"));
  EXPECT_EQ(run.processes.workers, 0);
  EXPECT_EQ(run.strategy.kind, parallel::StrategyKind::kSingle);
  ASSERT_TRUE(run.train_set && run.test_set);
  EXPECT_EQ(run.test_set->info().samples, 20);
  EXPECT_EQ(run.batch.micro, 16);
  EXPECT_EQ(run.batch.steps_per_epoch, 4);
}

// Several GPUs under strategy: auto start one ddp worker each; the process
// that only starts them plans each worker's strategy and reads no data.
TEST(RunPlan, AProcessThatStartsWorkersPlansThemAndReadsNoData) {
  RunRequest request;
  request.inventory = machine(2);
  const RunPlan run = resolve_run(run_config(), request);
  EXPECT_EQ(run.processes.workers, 2);
  EXPECT_EQ(run.launch.world_size, 2);
  ASSERT_EQ(run.worker_strategies.size(), 2U);
  EXPECT_EQ(run.worker_strategies[1].replicas, std::vector<torch::Device>{torch::Device(torch::kCUDA, 1)});
  EXPECT_EQ(run.strategy.replicas, run.worker_strategies[0].replicas);
  EXPECT_FALSE(run.train_set);
  EXPECT_FALSE(run.test_set);
}

// A batch given twice over the processes is refused for the world the workers make.
TEST(RunPlan, TheBatchFormIsCheckedForTheWorkersWorld) {
  RunRequest request;
  request.nproc = 3;
  EXPECT_THROW(resolve_run(run_config({"ddp.backend=gloo", "data.micro_batch_size=8", "data.batch_size=32"}), request),
               ConfigError);
  request.nproc = 4;
  EXPECT_EQ(resolve_run(run_config({"ddp.backend=gloo", "data.micro_batch_size=8", "data.batch_size=32"}), request)
                .launch.world_size,
            4);
}

// `gputrain plan` hears of every problem: a refused GPU list falls back to the
// CPU, a refused train.amp to fp32, and what does not depend on them is still resolved.
TEST(RunPlan, CollectingListsEveryProblemAndResolvesTheRest) {
  const CollectedRun run = collect_run(run_config({"gpus=[4]", "train.amp=fp16"}), RunRequest{});
  ASSERT_EQ(run.problems.size(), 2U) << run.problems.front();
  EXPECT_TRUE(any_contains(run.problems, "gpus")) << run.problems.front();
  EXPECT_TRUE(any_contains(run.problems, "fp16")) << run.problems.back();
  EXPECT_EQ(run.reached, Reached::kComplete);
  EXPECT_EQ(run.plan.devices.primary(), torch::Device("cpu"));
  EXPECT_EQ(run.plan.loaded.config.train.amp, config::AmpMode::kOff);
  EXPECT_EQ(run.plan.batch.steps_per_epoch, 4);
}

TEST(RunPlan, CollectingStopsBeforeTheBatchWithoutData) {
  const CollectedRun run =
      collect_run(run_config({"data={dataset: npy, root: /nonexistent/gputrain-data}"}), RunRequest{});
  ASSERT_EQ(run.problems.size(), 1U);
  EXPECT_TRUE(any_contains(run.problems, "/nonexistent/gputrain-data")) << run.problems.front();
  EXPECT_EQ(run.reached, Reached::kStrategy);
  EXPECT_FALSE(run.plan.train_set);
  // The strict resolution throws the same problem.
  EXPECT_THROW(resolve_run(run_config({"data={dataset: npy, root: /nonexistent/gputrain-data}"}), RunRequest{}), Error);
}

TEST(SavedWeights, TestingReadsTheTestSplitInTestBatchesAndPredictingOnlyDescribesTraining) {
  const SavedWeightsPlan testing =
      resolve_saved_weights(run_config({"data.test_batch_size=10"}), {}, WeightsUse::kTest);
  EXPECT_EQ(testing.devices.primary(), torch::Device("cpu"));
  EXPECT_EQ(testing.data->info().samples, 20);
  EXPECT_EQ(testing.batches.batch_size, 10);
  const SavedWeightsPlan predicting = resolve_saved_weights(run_config(), {}, WeightsUse::kPredict);
  EXPECT_EQ(predicting.data->info().samples, 100);
  EXPECT_EQ(predicting.batches.batch_size, 32);
}

TEST(SavedWeights, RefusesWhatTestingCannotUse) {
  EXPECT_THROW(resolve_saved_weights(run_config({"train.amp=fp16"}), {}, WeightsUse::kTest), ConfigError);
  // Test-time augmentation shifts images, and these samples are feature vectors.
  EXPECT_THROW(resolve_saved_weights(run_config({"train.tta.translate=2"}), {}, WeightsUse::kTest), ConfigError);
}

}  // namespace
}  // namespace gputrain::plan
