#pragma once
// Everything a training run leaves in its directory for people to look at,
// beside the log, metrics.jsonl and the weights: run.json and device.json at
// the start, TensorBoard events and the GPU monitor's figures while it trains,
// report.html at the end, however it ends; and the same to an MLflow server.
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/device/inventory.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/report/gpu_monitor.h"
#include "gputrain/report/mlflow.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_info.h"
#include "gputrain/train/observer.h"
#include "gputrain/train/trainer.h"

namespace gputrain::report {

struct RunRecorderOptions {
  RunSettings run;
  bool tensorboard = false;                   // write TensorBoard event files
  int64_t monitor_ms = 0;                     // the GPU monitor's sampling period; 0: off
  LoaderSettings loader;                      // named by the monitor's utilization hints
  std::optional<MlflowTarget> mlflow;         // log the run to this MLflow server
  std::map<std::string, std::string> params;  // the config by dotted key: the MLflow run's params
};
// `mlflow_tracking_uri`: MLFLOW_TRACKING_URI as app/ read it.
RunRecorderOptions run_recorder_options(const plan::RunPlan& run,
                                        const std::optional<std::string>& mlflow_tracking_uri = std::nullopt);

class RunRecorder {
 public:
  // Writes run.json (status "running") and device.json, opens the event file
  // (options.tensorboard) and starts the GPU monitor (CUDA devices and
  // options.monitor_ms > 0). Throws Error when the directory cannot be written.
  RunRecorder(const RunPaths& paths, const RunRecorderOptions& options, const plan::TrainLayout& layout,
              const device::DeviceInventory& inventory, train::TrainObserver& next);
  ~RunRecorder();

  // What Trainer::fit reports to: the monitor adds its figures to each epoch,
  // then `next` and the TensorBoard writer get every event.
  train::TrainObserver& observer();

  // Record how the run ended in run.json and write report.html. They never
  // throw (a report that cannot be written is only logged), so they cannot
  // hide how the run itself ended.
  void finish(const train::TrainSummary& summary);
  // Status "interrupted" for an Error with exit code 130, else "failed"; the
  // error's message goes into run.json and the report.
  void fail(const std::exception& error);
  // Status "interrupted": training stopped at a step boundary (a signal).
  void interrupt(const std::string& why);

 private:
  void end(RunStatus status, const std::string& error);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::report
