// RunRecorder in process: what it writes when a run starts, and when it ends
// finished, failed or interrupted.
#include "gputrain/report/run_recorder.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gputrain/common/error.h"
#include "gputrain/report/metrics_writer.h"
#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

namespace fs = std::filesystem;

struct Recorder : train::TrainObserver {
  int epochs = 0;
  void on_epoch(const train::EpochMetrics&) override { ++epochs; }
};

int event_files(const fs::path& dir) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().filename().string().rfind("events.", 0) == 0;
  return n;
}

plan::TrainLayout cpu_layout() {
  plan::TrainLayout layout;
  layout.strategy.replicas = {torch::Device(torch::kCPU)};
  layout.train_samples = 10;
  layout.batch.micro = 4;
  layout.batch.last_micro = 2;
  layout.batch.steps_per_epoch = 3;
  return layout;
}

RunRecorderOptions recorder_options(const std::string& name, bool tensorboard = true) {
  RunRecorderOptions options;
  options.run.name = name;
  options.run.epochs = 2;
  options.tensorboard = tensorboard;
  return options;
}

struct RunDir {
  testing::TempDir dir;
  RunPaths paths;
  RunDir() { paths = prepare_run_dir({dir / "run", "name: run\n", false}); }
  nlohmann::json info() const { return nlohmann::json::parse(testing::read_text(paths.run_info)); }
};

TEST(RunRecorder, StartsTheRecordAndWritesTheReportWhenTheRunFinishes) {
  RunDir run;
  Recorder next;
  RunRecorder recorder(run.paths, recorder_options("done"), cpu_layout(), device::DeviceInventory{}, next);
  EXPECT_EQ(run.info()["status"], "running");
  EXPECT_EQ(run.info()["name"], "done");
  EXPECT_EQ(run.info()["epochs"], 2);
  EXPECT_EQ(run.info()["last_micro_batch"], 2);
  EXPECT_TRUE(nlohmann::json::parse(testing::read_text(run.paths.device_report)).contains("gpus"));
  EXPECT_EQ(event_files(run.paths.dir), 1);
  {
    MetricsWriter metrics(run.paths.metrics);
    train::EpochMetrics m;
    m.epoch = 1;
    metrics.on_epoch(m);
    recorder.observer().on_epoch(m);
  }
  EXPECT_EQ(next.epochs, 1) << "events reach the observer behind the recorder";
  EXPECT_FALSE(fs::exists(run.paths.report));
  recorder.finish(train::TrainSummary{});
  EXPECT_EQ(run.info()["status"], "finished");
  EXPECT_NE(testing::read_text(run.paths.report).find(R"(<span class="badge ok">finished</span>)"), std::string::npos);
}

TEST(RunRecorder, AnInterruptionAndAFailureAreToldApart) {
  RunDir run;
  testing::write_text(run.paths.metrics, "");
  Recorder next;
  RunRecorder recorder(run.paths, recorder_options("stopped", /*tensorboard=*/false), cpu_layout(),
                       device::DeviceInventory{}, next);
  EXPECT_EQ(event_files(run.paths.dir), 0) << "tensorboard off";
  recorder.fail(Interrupted("stopped by SIGINT at step 7"));
  EXPECT_EQ(run.info()["status"], "interrupted");
  EXPECT_EQ(run.info()["error"], "stopped by SIGINT at step 7");
  EXPECT_NE(testing::read_text(run.paths.report).find("The run was stopped: stopped by SIGINT at step 7"),
            std::string::npos);
  recorder.fail(std::runtime_error("CUDA out of memory"));
  EXPECT_EQ(run.info()["status"], "failed");
  EXPECT_NE(testing::read_text(run.paths.report).find("The run failed: CUDA out of memory"), std::string::npos);
}

TEST(RunRecorder, AReportThatCannotBeWrittenIsOnlyLogged) {
  RunDir run;
  Recorder next;
  RunRecorder recorder(run.paths, recorder_options("nometrics"), cpu_layout(), device::DeviceInventory{}, next);
  EXPECT_NO_THROW(
      recorder.finish(train::TrainSummary{}));  // no metrics.jsonl: the report fails, the run's outcome stands
  EXPECT_EQ(run.info()["status"], "finished");
  EXPECT_FALSE(fs::exists(run.paths.report));
}

}  // namespace
}  // namespace gputrain::report
