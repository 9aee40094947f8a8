// `gputrain sweep`: the experiment trained once per seed (and per --vary
// value), each run a `gputrain train` child process, one after another; then
// the table of what each reached.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/common/process.h"
#include "gputrain/config/load.h"
#include "gputrain/config/output_paths.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/sweep.h"
#include "signals.h"

namespace gputrain::app {

namespace {

// The last line of a run's standard output that is a JSON object: train's result line.
nlohmann::json result_line(const std::string& out) {
  std::size_t end = out.size();
  while (end > 0) {
    const std::size_t begin = out.rfind('\n', end - 1);
    const std::size_t from = begin == std::string::npos ? 0 : begin + 1;
    const std::string line = out.substr(from, end - from);
    if (!line.empty() && line.front() == '{') {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) return j;
    }
    if (begin == std::string::npos) break;
    end = begin;
  }
  return nullptr;
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args) {
  auto* sweep = app.add_subcommand(
      "sweep",
      "train the experiment once per seed (and per --vary value), one run after another, then print each run's "
      "test accuracy and time to target with their mean and standard deviation");
  add_config_options(sweep, args.config, args.overrides);
  sweep->add_option("--seeds", args.seeds, "the seeds: a range 0..4 (both ends included) or a list 0,3,7")->required();
  sweep
      ->add_option("--vary", args.vary,
                   "also run every value of a key, e.g. --vary optim.lr=0.05,0.1 (each combination with each seed)")
      ->take_all();
  sweep->add_flag("--json", args.json, "print the runs and the summary as one JSON object instead of the table");
  return sweep;
}

int run_sweep(const SweepArgs& args) {
  // From here on a stop signal reaches the running `train`, which checkpoints,
  // and ends the sweep as it ends `train`.
  const SignalRelay relay;
  const std::vector<report::SweepPoint> points = report::sweep_points(report::parse_seeds(args.seeds), args.vary);
  // Refused here, once, rather than by every run.
  const config::ExperimentConfig config = config::load_config(args.config, args.overrides).config;
  const std::filesystem::path record = std::filesystem::path(config.output.dir) / (config.name + "-sweep.json");
  for (const report::SweepPoint& point : points) {
    std::vector<std::string> overrides = args.overrides;
    overrides.insert(overrides.end(), point.settings.begin(), point.settings.end());
    config::ExperimentConfig run = config::load_config(args.config, overrides).config;
    // The same sweep again: its first run would be refused, and the record of
    // the sweep that finished replaced by that refusal's.
    run.name = fmt::format("{}-sweep-{}", config.name, point.index);
    const std::filesystem::path dir = config::run_directory(run);
    if (!plan::finished_run_problem(dir).empty()) {
      // A sweep killed as a run ended (SIGKILL, a job's time limit) left the run without the record.
      std::error_code absent;
      const std::string where = std::filesystem::exists(record, absent)
                                    ? "its record: " + record.string()
                                    : "stopped before it wrote its record, " + record.string();
      throw UserError(fmt::format(
          "{}: holds a finished run (its model.pt), so this sweep has run here before ({}); a new sweep would "
          "replace it: sweep again under another name (--set name=...) or output.dir (--set output.dir=...)",
          dir.string(), where));
    }
  }
  const std::string executable = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<report::SweepRun> runs;
  int worst = 0;
  for (const report::SweepPoint& point : points) {
    std::vector<std::string> argv{executable, "train"};
    for (const std::string& file : args.config) argv.insert(argv.end(), {"--config", file});
    argv.insert(argv.end(), {"--log-level", args.log_level});
    for (const std::string& o : args.overrides) argv.insert(argv.end(), {"--set", o});
    for (const std::string& s : point.settings) argv.insert(argv.end(), {"--set", s});
    const std::string name = fmt::format("{}-sweep-{}", config.name, point.index);
    argv.insert(argv.end(), {"--set", fmt::format("seed={}", point.seed), "--set", "name=" + name});
    const std::string rerun = fmt::format("gputrain {}", fmt::join(argv.begin() + 1, argv.end(), " "));
    if (relay.stop_signal() != 0) {  // between two runs
      spdlog::warn("{}",
                   report::sweep_stop_message(signal_name(relay.stop_signal()), {point, 0, nullptr}, points.size(),
                                              /*started=*/false, rerun));
      worst = stop_exit_code(relay.stop_signal());
      break;
    }
    spdlog::info("sweep run {} of {}: seed {}{}{} -> {}/{}", point.index, points.size(), point.seed,
                 point.settings.empty() ? "" : ", ", fmt::join(point.settings, ", "), config.output.dir, name);
    const ChildOutput child = run_child(argv);
    runs.push_back({point, child.exit_code, result_line(child.out), child.wall_s});
    // After every run, so that a sweep killed part-way (a job's time limit) keeps the runs that ended.
    std::filesystem::create_directories(record.parent_path());
    write_atomically(record, report::sweep_json(runs).dump(2) + "\n");
    if (relay.stop_signal() != 0) {
      spdlog::warn("{}", report::sweep_stop_message(signal_name(relay.stop_signal()), runs.back(), points.size(),
                                                    /*started=*/true, rerun));
      worst = stop_exit_code(relay.stop_signal());
      break;
    }
    if (child.exit_code == 0) continue;
    worst = worst == 0 ? child.exit_code : worst;
    // Bad input or a stop request would end every later run the same way.
    if (child.exit_code == static_cast<int>(ExitCode::kUserInput) ||
        child.exit_code == static_cast<int>(ExitCode::kInterrupted) ||
        child.exit_code == static_cast<int>(ExitCode::kPreempted)) {
      spdlog::error("sweep run {} ended with exit code {}; the sweep stops", point.index, child.exit_code);
      break;
    }
  }
  if (args.json) {
    std::cout << report::sweep_json(runs).dump() << std::endl;
  } else {
    std::cout << report::format_sweep(runs) << std::flush;
  }
  spdlog::info("sweep record: {}", record.string());
  return worst;
}

}  // namespace gputrain::app
