#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "gputrain/checkpoint/resume.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/device/versions.h"
#include "gputrain/parallel/launcher.h"
#include "gputrain/report/console.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_recorder.h"
#include "gputrain/train/trainer.h"
#include "logging_setup.h"
#include "signals.h"

namespace gputrain::app {

namespace {
// "1 epoch", "2 epochs".
std::string counted(int64_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

// --output DIR becomes an override, so the resolved config records it.
std::string yaml_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

double test_pause_seconds(const Environment& env) {
  if (!env.test_pause_checkpoint_write) return 0;
  try {
    return std::stod(*env.test_pause_checkpoint_write);
  } catch (const std::exception&) {
    throw UserError(fmt::format("GPUTRAIN_TEST_PAUSE_CHECKPOINT_WRITE: '{}' is not a number of seconds",
                                *env.test_pause_checkpoint_write));
  }
}

// The config from --config, or, with --resume, the checkpoint's (--set on top).
checkpoint::Resumption starting_point(const TrainArgs& args, const std::vector<std::string>& overrides) {
  std::optional<config::LoadedConfig> file_config;
  if (!args.config.empty()) {
    file_config = config::load_config(args.config, overrides);
  } else if (args.resume.empty() || args.resume == "auto") {
    throw UserError("train needs --config FILE (or --resume with a checkpoint file, whose config it restores)");
  }
  if (args.resume.empty()) return {*file_config, std::nullopt};
  return checkpoint::resolve_resume(args.resume, file_config, overrides);
}

int64_t integer(const EnvValue& v) {
  std::size_t used = 0;
  try {
    const int64_t value = std::stoll(v.value, &used);
    if (used == v.value.size()) return value;
  } catch (const std::exception&) {
  }
  throw UserError(fmt::format("{}='{}' is not an integer; check the launcher's settings", v.name, v.value));
}

// What the launcher told this process; a world of 1 when nothing did.
parallel::LaunchInfo launch_info(const Environment& env) {
  parallel::LaunchInfo launch;
  if (env.rank || env.world_size) {
    if (!env.rank || !env.world_size) {
      const EnvValue& given = env.rank ? *env.rank : *env.world_size;
      throw UserError(fmt::format("{} is set but {} is not: a launched process needs both its rank and the world "
                                  "size",
                                  given.name, env.rank ? "WORLD_SIZE" : "RANK"));
    }
    launch.rank = integer(*env.rank);
    launch.world_size = integer(*env.world_size);
    launch.local_rank = env.local_rank ? integer(*env.local_rank) : launch.rank;  // one machine
  }
  if (env.master_addr) launch.master_addr = env.master_addr->value;
  if (env.master_port) launch.master_port = integer(*env.master_port);
  launch.agent_store = env.agent_store && env.agent_store->value == "True";  // Python's str(True)
  if (env.restart_count) launch.attempt = integer(*env.restart_count);
  parallel::check_launch(launch);
  return launch;
}

std::vector<std::string> worker_arguments(const TrainArgs& args) {
  std::vector<std::string> out{"--log-level", args.log_level, "train"};
  if (!args.config.empty()) out.insert(out.end(), {"--config", args.config});
  if (!args.resume.empty()) out.insert(out.end(), {"--resume", args.resume});
  for (const auto& o : args.overrides) out.insert(out.end(), {"--set", o});
  if (!args.output.empty()) out.insert(out.end(), {"--output", args.output});
  return out;
}

// `train --nproc N`: checks the config once, then runs the workers.
int launch_workers(const TrainArgs& args, const config::LoadedConfig& loaded, const parallel::LaunchInfo& launch) {
  if (launch.world_size > 1) {
    throw UserError(fmt::format("--nproc starts workers of its own, but this process is already rank {} of {} "
                                "(launched by torchrun or srun); leave --nproc out",
                                launch.rank, launch.world_size));
  }
  const device::DevicePlan devices =
      device::resolve_devices(loaded, device::probe_devices(args.env.cuda_visible_devices));
  parallel::check_local_workers(loaded, devices, *args.nproc);
  parallel::LauncherOptions options;
  options.nproc = *args.nproc;
  options.executable = std::filesystem::read_symlink("/proc/self/exe").string();
  options.arguments = worker_arguments(args);
  options.environment = args.env.all;
  options.master_addr = launch.master_addr;
  if (args.env.master_port) options.master_port = launch.master_port;
  return parallel::run_local_workers(options);
}
}  // namespace

int run_train(const TrainArgs& args) {
  install_setup_signal_handlers();
  const parallel::LaunchInfo launch = launch_info(args.env);
  if (launch.world_size > 1) set_rank_logging(launch.rank);
  // Only rank 0 writes the run directory; the others only train.
  const bool primary = launch.rank == 0;
  std::vector<std::string> overrides = args.overrides;
  if (!args.output.empty()) overrides.push_back("output.dir=" + yaml_quoted(args.output));
  const checkpoint::Resumption start = starting_point(args, overrides);
  const config::LoadedConfig& loaded = start.config;
  if (args.nproc) return launch_workers(args, loaded, launch);
  const device::DeviceInventory inventory = device::probe_devices(args.env.cuda_visible_devices);
  const device::DevicePlan devices = device::resolve_devices(loaded, inventory);
  const report::RunPaths planned = report::run_paths(loaded.config);

  // Everything that can refuse the run (the data, the model, the checkpoint)
  // is checked before the run directory is touched, so that a failed re-run
  // leaves an earlier run's files as they were.
  train::Trainer trainer(loaded, devices, launch);
  if (start.checkpoint) {
    const checkpoint::Position& at = start.checkpoint->state().position;
    spdlog::info("resuming from {}: {} epochs done, {} micro-batches into the next, step {}",
                 start.checkpoint->name(), at.epoch, at.batch, at.step);
    trainer.resume(*start.checkpoint);
  }
  std::optional<report::RunDirLock> lock;
  if (primary) {
    lock.emplace(planned.dir);  // one process per run directory
    if (!start.checkpoint) checkpoint::check_checkpoint_dir(checkpoint::checkpoint_dir(loaded.config));
  }
  const report::RunPaths paths = primary ? report::prepare_run_dir(loaded.config, start.checkpoint.has_value())
                                         : planned;
  if (primary) add_log_file(paths.log.string());
  spdlog::info("{}", device::version_line());
  spdlog::info("run '{}' from {} writes to {}", loaded.config.name,
               start.checkpoint ? start.checkpoint->name() : args.config, paths.dir.string());
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);
  if (primary && start.checkpoint) {
    const checkpoint::Position& at = start.checkpoint->state().position;
    report::rewind_metrics(paths.metrics, at.step, at.batch > 0);
  }
  train::ObserverList observers;
  std::optional<report::MetricsWriter> metrics;
  std::optional<report::ConsoleReporter> console;
  std::optional<report::RunRecorder> recorder;
  if (primary) {
    metrics.emplace(paths.metrics);
    console.emplace(isatty(STDERR_FILENO) != 0);
    observers.add(&*console);
    observers.add(&*metrics);
    recorder.emplace(paths, loaded.config, trainer.layout(), inventory, observers);
  }
  train::FitOptions options;
  options.checkpoint_dir = checkpoint::checkpoint_dir(loaded.config);
  options.stop = &install_signal_handlers(loaded.config.train.on_sigint);
  options.write_hooks.pause_mid_write_s = test_pause_seconds(args.env);
  train::TrainSummary summary;
  try {
    summary = trainer.fit(recorder ? recorder->observer() : observers, options);
    if (primary && !summary.stopped) train::save_weights(trainer.model(), paths.weights.string());
  } catch (const std::exception& e) {
    if (recorder) recorder->fail(e);  // the report of what the run got through
    throw;
  }

  nlohmann::ordered_json result{{"name", loaded.config.name},
                                {"run_dir", paths.dir.string()},
                                {"device", devices.primary().str()},
                                {"epochs", summary.epochs},
                                {"steps", summary.steps},
                                {"elapsed_s", summary.elapsed_s}};
  if (summary.stopped) {
    if (!primary) return static_cast<int>(ExitCode::kInterrupted);
    const std::string stopped = fmt::format("stopped by {} after step {}",
                                            stop_signal_name().empty() ? "request" : stop_signal_name(), summary.steps);
    recorder->interrupt(stopped);
    spdlog::warn("{}; {}", stopped,
                 summary.checkpoint.empty()
                     ? std::string("no checkpoint was written")
                     : fmt::format("continue with: gputrain train --resume {}", summary.checkpoint));
    result["stopped"] = true;
    result["checkpoint"] = summary.checkpoint;
    result["report"] = paths.report.string();
    std::cout << result.dump() << std::endl;
    return static_cast<int>(ExitCode::kInterrupted);
  }
  if (!primary) return 0;
  spdlog::info("finished {} ({}) in {:.1f} s; weights in {}", counted(summary.epochs, "epoch"),
               counted(summary.steps, "step"),
               summary.elapsed_s, paths.weights.string());
  recorder->finish();
  result["weights"] = paths.weights.string();
  result["report"] = paths.report.string();
  if (summary.has_test) {
    result["train_loss"] = summary.last_train.mean_loss();
    result["test_loss"] = summary.last_test.mean_loss();
    if (summary.last_test.classification) result["test_accuracy"] = summary.last_test.accuracy();
  }
  std::cout << result.dump() << std::endl;
  return 0;
}

}  // namespace gputrain::app
