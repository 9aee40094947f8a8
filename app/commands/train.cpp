#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/device/versions.h"
#include "gputrain/parallel/launcher.h"
#include "gputrain/report/console.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_dir.h"
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
  std::vector<std::string> out{"--log-level", args.log_level, "train", "--config", args.config};
  for (const auto& o : args.overrides) out.insert(out.end(), {"--set", o});
  if (!args.output.empty()) out.insert(out.end(), {"--output", args.output});
  return out;
}

// `train --nproc N`: checks the config once, then runs the workers.
int launch_workers(const TrainArgs& args, const parallel::LaunchInfo& launch) {
  if (launch.world_size > 1) {
    throw UserError(fmt::format("--nproc starts workers of its own, but this process is already rank {} of {} "
                                "(launched by torchrun or srun); leave --nproc out",
                                launch.rank, launch.world_size));
  }
  const config::LoadedConfig loaded = config::load_config(args.config, args.overrides);
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
  const parallel::LaunchInfo launch = launch_info(args.env);
  if (args.nproc) return launch_workers(args, launch);
  if (launch.world_size > 1) set_rank_logging(launch.rank);
  // Only rank 0 writes the run directory; the others only train.
  const bool primary = launch.rank == 0;
  std::vector<std::string> overrides = args.overrides;
  if (!args.output.empty()) overrides.push_back("output.dir=" + yaml_quoted(args.output));
  const config::LoadedConfig loaded = config::load_config(args.config, overrides);
  const device::DeviceInventory inventory = device::probe_devices(args.env.cuda_visible_devices);
  const device::DevicePlan devices = device::resolve_devices(loaded, inventory);
  const report::RunPaths paths = primary ? report::prepare_run_dir(loaded.config) : report::run_paths(loaded.config);
  if (primary) add_log_file(paths.log.string());

  spdlog::info("{}", device::version_line());
  spdlog::info("run '{}' from {} writes to {}", loaded.config.name, args.config, paths.dir.string());
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);

  train::Trainer trainer(loaded, devices, launch);
  train::ObserverList observers;
  std::optional<report::MetricsWriter> metrics;
  std::optional<report::ConsoleReporter> console;
  if (primary) {
    metrics.emplace(paths.metrics);
    console.emplace(isatty(STDERR_FILENO) != 0);
    observers.add(&*console);
    observers.add(&*metrics);
  }
  const train::TrainSummary summary = trainer.fit(observers);
  if (!primary) return 0;
  train::save_weights(trainer.model(), paths.weights.string());
  spdlog::info("finished {} epochs ({} steps) in {:.1f} s; weights in {}", summary.epochs, summary.steps,
               summary.elapsed_s, paths.weights.string());

  nlohmann::ordered_json result{{"name", loaded.config.name},
                                {"run_dir", paths.dir.string()},
                                {"device", devices.primary().str()},
                                {"epochs", summary.epochs},
                                {"steps", summary.steps},
                                {"elapsed_s", summary.elapsed_s},
                                {"weights", paths.weights.string()}};
  if (summary.has_test) {
    result["train_loss"] = summary.last_train.mean_loss();
    result["test_loss"] = summary.last_test.mean_loss();
    if (summary.last_test.classification) result["test_accuracy"] = summary.last_test.accuracy();
  }
  std::cout << result.dump() << std::endl;
  return 0;
}

}  // namespace gputrain::app
