#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/device/versions.h"
#include "gputrain/report/console.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_recorder.h"
#include "gputrain/train/trainer.h"
#include "logging_setup.h"

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
}  // namespace

int run_train(const TrainArgs& args) {
  std::vector<std::string> overrides = args.overrides;
  if (!args.output.empty()) overrides.push_back("output.dir=" + yaml_quoted(args.output));
  const config::LoadedConfig loaded = config::load_config(args.config, overrides);
  const device::DeviceInventory inventory = device::probe_devices(args.env.cuda_visible_devices);
  const device::DevicePlan devices = device::resolve_devices(loaded, inventory);
  const report::RunPaths paths = report::prepare_run_dir(loaded.config);
  add_log_file(paths.log.string());

  spdlog::info("{}", device::version_line());
  spdlog::info("run '{}' from {} writes to {}", loaded.config.name, args.config, paths.dir.string());
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);

  train::Trainer trainer(loaded, devices);
  report::MetricsWriter metrics(paths.metrics);
  report::ConsoleReporter console(isatty(STDERR_FILENO) != 0);
  train::ObserverList observers;
  observers.add(&console);
  observers.add(&metrics);
  report::RunRecorder recorder(paths, loaded.config, trainer.layout(), inventory, observers);
  train::TrainSummary summary;
  try {
    summary = trainer.fit(recorder.observer());
    train::save_weights(trainer.model(), paths.weights.string());
  } catch (const std::exception& e) {
    recorder.fail(e);  // the report of what the run got through
    throw;
  }
  spdlog::info("finished {} epochs ({} steps) in {:.1f} s; weights in {}", summary.epochs, summary.steps,
               summary.elapsed_s, paths.weights.string());
  recorder.finish();

  nlohmann::ordered_json result{{"name", loaded.config.name},
                                {"run_dir", paths.dir.string()},
                                {"device", devices.primary().str()},
                                {"epochs", summary.epochs},
                                {"steps", summary.steps},
                                {"elapsed_s", summary.elapsed_s},
                                {"weights", paths.weights.string()},
                                {"report", paths.report.string()}};
  if (summary.has_test) {
    result["train_loss"] = summary.last_train.mean_loss();
    result["test_loss"] = summary.last_test.mean_loss();
    if (summary.last_test.classification) result["test_accuracy"] = summary.last_test.accuracy();
  }
  std::cout << result.dump() << std::endl;
  return 0;
}

}  // namespace gputrain::app
