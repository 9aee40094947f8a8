#include "gputrain/report/run_info.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

TEST(RunInfo, DescribesStrategyAndSplitsAndRoundTrips) {
  const RunSettings settings{"r", config::AmpMode::kOff, /*epochs=*/3};
  plan::TrainLayout layout;
  layout.strategy.kind = parallel::StrategyKind::kDistributed;
  layout.strategy.replicas = {torch::Device(torch::kCPU)};
  layout.strategy.reason = "strategy: ddp, world size 3";
  layout.world_size = 3;
  layout.train_samples = 50;
  layout.batch.global = 40;
  layout.batch.micro = 20;
  layout.batch.accumulation = 2;
  layout.batch.last_micro = 10;
  layout.batch.steps_per_epoch = 2;
  layout.classification = false;
  layout.class_names = {"ignored"};  // a regression run has no classes to name
  RunInfo info = describe_run(settings, layout);
  EXPECT_EQ(info.batch_size, 40);
  EXPECT_EQ(info.accumulation_steps, 2);
  EXPECT_EQ(info.strategy, "ddp");
  EXPECT_EQ(info.replicas, (std::vector<std::string>{"rank 0", "rank 1", "rank 2"}));
  EXPECT_EQ(info.task, Task::kRegression);
  EXPECT_TRUE(info.class_names.empty());
  ASSERT_EQ(info.full_split.size(), 3u);  // 20 rows: 7, 7, 6
  EXPECT_EQ(info.full_split[2].rows(), 6);
  ASSERT_EQ(info.last_split.size(), 3u);  // 10 rows: 4, 4, 2
  EXPECT_EQ(info.last_split[2].rows(), 2);
  EXPECT_EQ(info.status, RunStatus::kRunning);
  EXPECT_FALSE(info.started.empty());
  end_run(info, RunStatus::kFailed, "boom");

  testing::TempDir dir;
  write_run_info(dir / "run.json", info);
  const RunInfo back = read_run_info(dir / "run.json");
  EXPECT_EQ(back.status, RunStatus::kFailed);
  EXPECT_EQ(back.error, "boom");
  EXPECT_EQ(back.ended, info.ended);
  EXPECT_EQ(back.epochs, 3);
  EXPECT_EQ(back.accumulation_steps, 2);
  EXPECT_EQ(back.last_split.size(), 3u);
  EXPECT_EQ(back.last_split[1].device, "rank 1");
  EXPECT_EQ(back.last_split[1].begin, 4);

  testing::write_text(dir / "bad.json", "[1, 2]");
  EXPECT_THROW(read_run_info(dir / "bad.json"), UserError);
  EXPECT_THROW(read_run_info(dir / "missing.json"), UserError);
}

TEST(RunInfo, TheTargetReachedAndAnEarlyEndRoundTrip) {
  RunSettings settings{"r", config::AmpMode::kOff, 3};
  settings.target_accuracy = 0.93;
  RunInfo info = describe_run(settings, plan::TrainLayout{});
  train::TrainSummary summary;
  summary.target = train::TargetReached{0.93, 0.9312, 2, 37, 4.5, 5.25};
  summary.ended_early = "test accuracy 93.12% reached train.target_accuracy";
  record_outcome(info, summary);
  end_run(info, RunStatus::kFinished);
  testing::TempDir dir;
  write_run_info(dir / "run.json", info);
  const RunInfo back = read_run_info(dir / "run.json");
  EXPECT_DOUBLE_EQ(back.target_accuracy, 0.93);
  ASSERT_TRUE(back.target.has_value());
  EXPECT_EQ(back.target->epoch, 2);
  EXPECT_EQ(back.target->step, 37);
  EXPECT_DOUBLE_EQ(back.target->accuracy, 0.9312);
  EXPECT_DOUBLE_EQ(back.target->train_s, 4.5);
  EXPECT_DOUBLE_EQ(back.target->wall_s, 5.25);
  EXPECT_EQ(back.ended_early, summary.ended_early);
  const std::string json = testing::read_text(dir / "run.json");
  EXPECT_NE(json.find("\"time_to_target_s\": 4.5"), std::string::npos) << json;

  RunInfo unreached = describe_run(settings, plan::TrainLayout{});
  write_run_info(dir / "unreached.json", unreached);
  EXPECT_FALSE(read_run_info(dir / "unreached.json").target.has_value());
}

TEST(RunInfo, TheClassNamesRoundTripAndAnOlderRunJsonHasNone) {
  plan::TrainLayout layout;
  layout.class_names = {"T-shirt/top", "Trouser"};
  const RunInfo info = describe_run(RunSettings{}, layout);
  testing::TempDir dir;
  write_run_info(dir / "run.json", info);
  EXPECT_EQ(read_run_info(dir / "run.json").class_names, (std::vector<std::string>{"T-shirt/top", "Trouser"}));
  testing::write_text(dir / "old.json", R"({"name": "old", "task": "classification"})");
  EXPECT_TRUE(read_run_info(dir / "old.json").class_names.empty());
}

// The name, the epochs, train.amp and the target from the plan's pieces, not the config it holds.
TEST(RunInfo, SettingsComeFromThePlan) {
  plan::RunPlan run;
  run.loaded.config.name = "ignored";
  run.loaded.config.train.amp = config::AmpMode::kFp16;
  run.name = "from-config";
  run.loop.epochs = 4;
  run.step.amp = config::AmpMode::kBf16;
  run.evaluation.stop.target_accuracy = 0.9;
  const RunSettings settings = run_settings(run);
  EXPECT_EQ(settings.name, "from-config");
  EXPECT_EQ(settings.amp, config::AmpMode::kBf16);
  EXPECT_EQ(settings.epochs, 4);
  EXPECT_DOUBLE_EQ(settings.target_accuracy, 0.9);
}

}  // namespace
}  // namespace gputrain::report
