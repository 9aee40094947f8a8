#include "gputrain/report/run_dir.h"

#include <fmt/format.h>

#include <fstream>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"

namespace gputrain::report {

namespace fs = std::filesystem;

RunPaths run_paths(const config::ExperimentConfig& config) {
  return run_paths(fs::path(config.output.dir) / config.name);
}

RunPaths run_paths(const fs::path& dir) {
  RunPaths paths;
  paths.dir = dir;
  paths.config = paths.dir / "config.yaml";
  paths.log = paths.dir / "train.log";
  paths.metrics = paths.dir / "metrics.jsonl";
  paths.weights = paths.dir / "model.pt";
  paths.run_info = paths.dir / "run.json";
  paths.device_report = paths.dir / "device.json";
  paths.report = paths.dir / "report.html";
  return paths;
}

RunPaths prepare_run_dir(const config::ExperimentConfig& config, bool resuming) {
  const RunPaths paths = run_paths(config);
  std::error_code error;
  fs::create_directories(paths.dir, error);
  if (error) {
    throw UserError(fmt::format("{}: cannot create the run directory ({}). Choose another output.dir or --output.",
                                paths.dir.string(), error.message()));
  }
  if (!resuming && fs::exists(paths.metrics)) {
    int n = 1;
    while (fs::exists(paths.dir / fmt::format("metrics.{}.jsonl", n))) ++n;
    fs::rename(paths.metrics, paths.dir / fmt::format("metrics.{}.jsonl", n), error);
    if (error) throw UserError(fmt::format("{}: cannot keep the previous metrics: {}", paths.metrics.string(), error.message()));
  }
  // The weights are written last, after the training; a name taken by a
  // directory would lose them, so it is refused before the run starts.
  if (fs::is_directory(paths.weights, error)) {
    throw UserError(fmt::format("{}: is a directory, so the final weights could not be saved there. Move it away or "
                                "choose another output.dir or --output.",
                                paths.weights.string()));
  }
  std::ofstream out(paths.config, std::ios::binary | std::ios::trunc);
  out << "# resolved by gputrain; `gputrain train --config` accepts this file as is\n" << config::dump_config(config);
  if (!out.flush()) {
    throw UserError(fmt::format("{}: cannot write the resolved config. Is the output directory writable?",
                                paths.config.string()));
  }
  return paths;
}

}  // namespace gputrain::report
