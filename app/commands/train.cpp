#include <spdlog/spdlog.h>
#include <unistd.h>

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
#include "gputrain/report/console.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_dir.h"
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
}  // namespace

int run_train(const TrainArgs& args) {
  std::vector<std::string> overrides = args.overrides;
  if (!args.output.empty()) overrides.push_back("output.dir=" + yaml_quoted(args.output));
  const checkpoint::Resumption start = starting_point(args, overrides);
  const config::LoadedConfig& loaded = start.config;
  const device::DeviceInventory inventory = device::probe_devices(args.env.cuda_visible_devices);
  const device::DevicePlan devices = device::resolve_devices(loaded, inventory);
  const report::RunPaths paths = report::prepare_run_dir(loaded.config, start.checkpoint.has_value());
  add_log_file(paths.log.string());

  spdlog::info("{}", device::version_line());
  spdlog::info("run '{}' from {} writes to {}", loaded.config.name,
               start.checkpoint ? start.checkpoint->name() : args.config, paths.dir.string());
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);

  train::Trainer trainer(loaded, devices);
  if (start.checkpoint) {
    const checkpoint::Position& at = start.checkpoint->state().position;
    spdlog::info("resuming from {}: {} epochs done, {} micro-batches into the next, step {}",
                 start.checkpoint->name(), at.epoch, at.batch, at.step);
    trainer.resume(*start.checkpoint);
    report::rewind_metrics(paths.metrics, at.step, at.batch > 0);
  }
  report::MetricsWriter metrics(paths.metrics);
  report::ConsoleReporter console(isatty(STDERR_FILENO) != 0);
  train::ObserverList observers;
  observers.add(&console);
  observers.add(&metrics);
  train::FitOptions options;
  options.checkpoint_dir = checkpoint::checkpoint_dir(loaded.config);
  options.stop = &install_signal_handlers(loaded.config.train.on_sigint);
  options.write_hooks.pause_mid_write_s = test_pause_seconds(args.env);
  const train::TrainSummary summary = trainer.fit(observers, options);

  nlohmann::ordered_json result{{"name", loaded.config.name},
                                {"run_dir", paths.dir.string()},
                                {"device", devices.primary().str()},
                                {"epochs", summary.epochs},
                                {"steps", summary.steps},
                                {"elapsed_s", summary.elapsed_s}};
  if (summary.stopped) {
    spdlog::warn("stopped by {} after step {}; {}", stop_signal_name().empty() ? "request" : stop_signal_name(),
                 summary.steps,
                 summary.checkpoint.empty()
                     ? std::string("no checkpoint was written")
                     : fmt::format("continue with: gputrain train --resume {}", summary.checkpoint));
    result["stopped"] = true;
    result["checkpoint"] = summary.checkpoint;
    std::cout << result.dump() << std::endl;
    return static_cast<int>(ExitCode::kInterrupted);
  }
  train::save_weights(trainer.model(), paths.weights.string());
  spdlog::info("finished {} epochs ({} steps) in {:.1f} s; weights in {}", summary.epochs, summary.steps,
               summary.elapsed_s, paths.weights.string());
  result["weights"] = paths.weights.string();
  if (summary.has_test) {
    result["train_loss"] = summary.last_train.mean_loss();
    result["test_loss"] = summary.last_test.mean_loss();
    if (summary.last_test.classification) result["test_accuracy"] = summary.last_test.accuracy();
  }
  std::cout << result.dump() << std::endl;
  return 0;
}

}  // namespace gputrain::app
