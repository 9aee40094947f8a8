#include "gputrain/report/run_recorder.h"

#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/device/inventory_report.h"
#include "gputrain/report/gpu_monitor.h"
#include "gputrain/report/html_report.h"
#include "gputrain/report/run_info.h"
#include "gputrain/report/tensorboard.h"

namespace gputrain::report {

struct RunRecorder::State {
  RunPaths paths;
  RunInfo info;
  train::ObserverList outputs;
  std::optional<TensorBoardWriter> tensorboard;
  std::unique_ptr<MlflowLogger> mlflow;
  std::optional<GpuMonitor> monitor;
  std::optional<GpuMonitorObserver> monitored;
};

RunRecorderOptions run_recorder_options(const plan::RunPlan& run,
                                        const std::optional<std::string>& mlflow_tracking_uri) {
  RunRecorderOptions options;
  options.run = run_settings(run);
  options.tensorboard = run.outputs.tensorboard;
  options.monitor_ms = run.outputs.monitor_ms;
  options.loader = LoaderSettings{run.train_loader.num_workers, run.batch.global};
  options.mlflow = mlflow_target(run, mlflow_tracking_uri);
  if (options.mlflow) options.params = run.outputs.params;
  return options;
}

RunRecorder::RunRecorder(const RunPaths& paths, const RunRecorderOptions& options, const plan::TrainLayout& layout,
                         const device::DeviceInventory& inventory, train::TrainObserver& next)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.paths = paths;
  s.info = describe_run(options.run, layout);
  write_run_info(paths.run_info, s.info);
  write_atomically(paths.device_report, device::inventory_json(inventory));
  s.outputs.add(&next);
  if (options.tensorboard) {
    s.tensorboard.emplace(paths.dir, s.info);
    s.outputs.add(&*s.tensorboard);
    spdlog::info("TensorBoard events: {}", s.tensorboard->path().string());
  }
  if (options.mlflow) {
    s.mlflow = std::make_unique<MlflowLogger>(*options.mlflow, paths.dir, s.info, options.params);
    s.outputs.add(s.mlflow.get());
    spdlog::info("MLflow: logging to {}, experiment '{}', run '{}'", options.mlflow->uri, options.mlflow->experiment,
                 options.mlflow->run_name);
  }
  if (options.monitor_ms > 0) {
    const std::vector<MonitoredGpu> gpus = monitored_gpus(inventory, layout.strategy.replicas);
    if (!gpus.empty()) s.monitor.emplace(gpus, std::chrono::milliseconds(options.monitor_ms));
  }
  s.monitored.emplace(s.monitor ? &*s.monitor : nullptr, options.loader, s.outputs);
}

RunRecorder::~RunRecorder() = default;

train::TrainObserver& RunRecorder::observer() { return *state_->monitored; }

void RunRecorder::finish(const train::TrainSummary& summary) {
  record_outcome(state_->info, summary);
  end(RunStatus::kFinished, "");
}

void RunRecorder::interrupt(const std::string& why) { end(RunStatus::kInterrupted, why); }

void RunRecorder::fail(const std::exception& error) {
  const auto* ours = dynamic_cast<const Error*>(&error);
  const bool interrupted = ours != nullptr && ours->code() == ExitCode::kInterrupted;
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  end(interrupted ? RunStatus::kInterrupted : RunStatus::kFailed,
      torch_error ? torch_error->what_without_backtrace() : error.what());
}

void RunRecorder::end(RunStatus status, const std::string& error) {
  State& s = *state_;
  try {
    end_run(s.info, status, error);
    write_run_info(s.paths.run_info, s.info);
    write_html_report(s.paths.dir, s.paths.report);
    spdlog::info("report: {}", s.paths.report.string());
  } catch (const std::exception& e) {
    spdlog::warn("the run report could not be written: {}", e.what());
  }
  if (s.mlflow) {
    s.mlflow->finish(status == RunStatus::kFinished ? MlflowStatus::kFinished
                     : status == RunStatus::kFailed ? MlflowStatus::kFailed
                                                    : MlflowStatus::kKilled,
                     {s.paths.report, s.paths.config, s.paths.run_info});
  }
}

}  // namespace gputrain::report
