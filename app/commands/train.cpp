#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/common/process.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/output_paths.h"
#include "gputrain/data/description.h"
#include "gputrain/device/versions.h"
#include "gputrain/parallel/launcher.h"
#include "gputrain/plan/start.h"
#include "gputrain/report/console.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/mlflow.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_recorder.h"
#include "gputrain/train/trainer.h"
#include "logging_setup.h"
#include "signals.h"

namespace gputrain::app {

namespace {
// --output DIR becomes an override, so the resolved config records it.
std::string yaml_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> worker_arguments(const TrainArgs& args) {
  std::vector<std::string> out{"--log-level", args.log_level, "train"};
  for (const std::string& file : args.config) out.insert(out.end(), {"--config", file});
  if (!args.resume.empty()) out.insert(out.end(), {"--resume", args.resume});
  for (const auto& o : args.overrides) out.insert(out.end(), {"--set", o});
  if (!args.output.empty()) out.insert(out.end(), {"--output", args.output});
  return out;
}

// `train --nproc N` (or strategy: auto on several GPUs): the config was
// checked once, in `run`'s resolution; runs the workers.
int launch_workers(const TrainArgs& args, const parallel::LaunchInfo& launch, plan::RunPlan run) {
  parallel::LauncherOptions options;
  options.nproc = run.processes.workers;
  options.executable = std::filesystem::read_symlink("/proc/self/exe").string();
  options.arguments = worker_arguments(args);
  run.train_set.reset();  // each worker reads its own; the launcher holds none while they train
  // data.batch_size: auto was solved once, in the resolution, so that every
  // worker runs the same batch; their configs stay as written.
  const std::string stale = std::string(kResolvedBatchVariable) + "=";
  for (const std::string& entry : args.env.all) {
    if (entry.rfind(stale, 0) != 0) options.environment.push_back(entry);
  }
  if (run.batch_choice) options.environment.push_back(launcher_batch_variable(run.batch.sizes()));
  options.max_restarts = args.max_restarts;
  options.master_addr = launch.master_addr;
  if (args.env.master_port) options.master_port = launch.master_port;
  return parallel::run_local_workers(options);
}

// Everything resolved and checked before anything is touched: the config
// (or the checkpoint's), the launch, the devices, the run (plan/start.h).
struct TrainPlan {
  plan::Start start;
  parallel::LaunchInfo launch;  // as a launcher told this process
  bool primary = true;          // only rank 0 writes the run directory; the others only train
};

TrainPlan plan_train(const TrainArgs& args) {
  TrainPlan plan;
  plan.launch = launch_info(args.env);
  if (plan.launch.world_size > 1) set_rank_logging(plan.launch.rank);
  plan.primary = plan.launch.rank == 0;
  plan::StartRequest request;
  request.purpose = plan::Purpose::kTrain;
  request.command = "train";
  request.config_files = args.config;
  request.overrides = args.overrides;
  if (!args.output.empty()) request.overrides.push_back("output.dir=" + yaml_quoted(args.output));
  request.resume = args.resume;
  request.launch = plan.launch;
  request.restarts = restarts(args.env, plan.launch);
  request.nproc = args.nproc;
  request.cuda_visible_devices = args.env.cuda_visible_devices;
  request.launcher_batch = launcher_batch(args.env);
  request.kernel_cache_env = args.env.kernel_caches;
  plan.start = plan::start_run(request);
  report::mlflow_target(plan.start.run, args.env.mlflow_tracking_uri);  // refused before anything is written
  spdlog::info("processes: {}", plan.start.run.processes.reason);
  return plan;
}

// The run's parts, with the checkpoint's state when resuming. Everything that
// can refuse the run (the data, the model, the checkpoint) is checked here,
// before the run directory is touched, so that a failed re-run leaves an
// earlier run's files as they were.
std::unique_ptr<train::Trainer> build_trainer(const TrainPlan& plan) {
  auto trainer = std::make_unique<train::Trainer>(plan.start.run);
  if (plan.start.checkpoint) {
    const checkpoint::Position& at = plan.start.checkpoint->state().position;
    spdlog::info("resuming from {}: {} epochs done, {} micro-batches into the next, step {}",
                 plan.start.checkpoint->name(), at.epoch, at.batch, at.step);
    trainer->resume(*plan.start.checkpoint);
  }
  return trainer;
}

// The run directory, locked, prepared and logged to (rank 0), and the
// observers that write into it.
struct RunDirectory {
  report::RunPaths paths;
  std::optional<report::RunDirLock> lock;
  train::ObserverList observers;
  std::optional<report::MetricsWriter> metrics;
  std::optional<report::ConsoleReporter> console;
  std::optional<report::RunRecorder> recorder;

  train::TrainObserver& observer() { return recorder ? recorder->observer() : observers; }
};

void open_run_dir(const TrainArgs& args, const TrainPlan& plan, const train::Trainer& trainer, RunDirectory& dir) {
  const plan::RunPlan& run = plan.start.run;
  const auto& resumed = plan.start.checkpoint;
  const report::RunDirOptions run_dir = report::run_dir_options(run, resumed.has_value());
  dir.paths = report::run_paths(run_dir.dir);
  if (plan.primary) {
    dir.lock.emplace(dir.paths.dir);  // one process per run directory
    dir.paths = report::prepare_run_dir(run_dir);
    add_log_file(dir.paths.log.string());
  } else {
    drop_early_log();
  }
  spdlog::info("{}", device::version_line());
  spdlog::info("run '{}' from {} writes to {}", run.name,
               resumed ? resumed->name() : fmt::format("{}", fmt::join(args.config, " + ")), dir.paths.dir.string());
  spdlog::info("device: {} ({})", run.devices.primary().str(), run.devices.reason);
  if (!run.devices.warning.empty()) spdlog::warn("{}", run.devices.warning);
  if (!plan.primary) return;
  if (resumed) {
    const checkpoint::Position& at = resumed->state().position;
    report::rewind_metrics(dir.paths.metrics, at.step, at.batch > 0);
  }
  dir.metrics.emplace(dir.paths.metrics);
  dir.console.emplace(isatty(STDERR_FILENO) != 0);
  dir.observers.add(&*dir.console);
  dir.observers.add(&*dir.metrics);
  dir.recorder.emplace(dir.paths, report::run_recorder_options(run, args.env.mlflow_tracking_uri), trainer.layout(),
                       plan.start.inventory, dir.observers);
}

// Trains, writes model.pt and the run's report, and prints the result line.
int train(const TrainArgs& args, const TrainPlan& plan, train::Trainer& trainer, RunDirectory& dir) {
  const plan::RunPlan& run = plan.start.run;
  train::FitOptions options;
  options.checkpoint_dir = run.outputs.checkpoint_dir;
  options.stop = &install_signal_handlers(run.loop.on_sigint);
  options.write_hooks = args.checkpoint_write_hooks;
  if (plan.primary) options.profile_dir = dir.paths.dir;
  train::TrainSummary summary;
  std::optional<double> process_s;  // at training's end: the last accuracy known, before model.pt is written
  try {
    summary = trainer.fit(dir.observer(), options);
    process_s = seconds_since_process_start();
    if (plan.primary && !summary.stopped) {
      checkpoint::save_weights(trainer.model(), dir.paths.weights.string(),
                               data::model_description(run.train_set->info()));
    }
  } catch (const std::exception& e) {
    if (dir.recorder) dir.recorder->fail(e);  // the report of what the run got through
    throw;
  }

  nlohmann::ordered_json result{{"name", run.name},
                                {"run_dir", dir.paths.dir.string()},
                                {"device", run.devices.primary().str()},
                                {"epochs", summary.epochs},
                                {"steps", summary.steps},
                                {"elapsed_s", summary.elapsed_s},
                                {"process_s", process_s ? nlohmann::ordered_json(*process_s) : nullptr}};
  if (summary.stopped) {
    const ExitCode code = summary.preempted ? ExitCode::kPreempted : ExitCode::kInterrupted;
    if (!plan.primary) return static_cast<int>(code);
    const std::string signal = stop_signal_name().empty() ? "request" : stop_signal_name();
    const std::string stopped = summary.preempted ? fmt::format("preempted ({}) after step {}", signal, summary.steps)
                                                  : fmt::format("stopped by {} after step {}", signal, summary.steps);
    dir.recorder->interrupt(stopped);
    std::string next = "no checkpoint was written";
    if (!summary.checkpoint.empty() && summary.preempted) {
      next = fmt::format(
          "exit code {} asks for a requeue: a requeued Slurm job (SLURM_RESTART_COUNT > 0) continues from {} under "
          "train.resume: auto; elsewhere run gputrain train --resume {}",
          static_cast<int>(code), summary.checkpoint, summary.checkpoint);
    } else if (!summary.checkpoint.empty()) {
      next = fmt::format("continue with: gputrain train --resume {}", summary.checkpoint);
    }
    spdlog::warn("{}; {}", stopped, next);
    result["stopped"] = true;
    if (summary.preempted) result["preempted"] = true;
    result["checkpoint"] = summary.checkpoint;
    result["report"] = dir.paths.report.string();
    std::cout << result.dump() << std::endl;
    return static_cast<int>(code);
  }
  if (!plan.primary) return 0;
  spdlog::info("finished {} ({}) in {:.1f} s; weights in {}", count_of(summary.epochs, "epoch"),
               count_of(summary.steps, "step"), summary.elapsed_s, dir.paths.weights.string());
  dir.recorder->finish(summary);
  result["weights"] = dir.paths.weights.string();
  result["report"] = dir.paths.report.string();
  if (summary.has_test) {
    result["train_loss"] = summary.last_train.mean_loss();
    result["test_loss"] = summary.last_test.mean_loss();
    if (summary.last_test.classification) result["test_accuracy"] = summary.last_test.accuracy();
  }
  if (run.evaluation.stop.target_accuracy > 0) {
    result["target_accuracy"] = run.evaluation.stop.target_accuracy;
    result["time_to_target_s"] = summary.target ? nlohmann::ordered_json(summary.target->train_s) : nullptr;
    result["time_to_target_wall_s"] = summary.target ? nlohmann::ordered_json(summary.target->wall_s) : nullptr;
    // End to end: from the process's start (LibTorch's loading, CUDA's start and the data's included) to the
    // evaluation that reached the target; fit() began elapsed_s before process_s.
    result["time_to_target_process_s"] =
        summary.target && process_s ? nlohmann::ordered_json(*process_s - summary.elapsed_s + summary.target->wall_s)
                                    : nullptr;
    if (!summary.target)
      spdlog::warn("train.target_accuracy ({:.2f}%) was not reached", 100 * run.evaluation.stop.target_accuracy);
  }
  if (!summary.ended_early.empty()) result["ended_early"] = summary.ended_early;
  if (const int64_t skipped = trainer.layout().skipped_images; skipped > 0) result["skipped_images"] = skipped;
  std::cout << result.dump() << std::endl;
  return 0;
}

}  // namespace

// config -> plan -> build -> run directory -> train.
int run_train(const TrainArgs& args) {
  install_setup_signal_handlers(/*checkpoint_requests=*/true);
  // The launcher (--nproc) trains nothing: its own handlers forward signals to the workers.
  if (!args.nproc) route_training_signals();
  keep_early_log();  // for train.log, which the run directory holds once it is prepared
  TrainPlan plan = plan_train(args);
  if (plan.start.run.processes.workers > 0) {
    drop_early_log();                             // the workers write train.log
    if (!args.nproc) hand_signals_to_launcher();  // routed above, before the devices were known
    return launch_workers(args, plan.launch, std::move(plan.start.run));
  }
  const std::unique_ptr<train::Trainer> trainer = build_trainer(plan);
  RunDirectory dir;
  open_run_dir(args, plan, *trainer, dir);
  return train(args, plan, *trainer, dir);
}

}  // namespace gputrain::app
