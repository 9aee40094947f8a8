#pragma once
// The run directory <output.dir>/<name>/: config.yaml, train.log, metrics.jsonl.
#include <filesystem>

#include "gputrain/config/config.h"

namespace gputrain::report {

struct RunPaths {
  std::filesystem::path dir;
  std::filesystem::path config;   // the resolved config, as `gputrain config` prints it
  std::filesystem::path log;      // train.log
  std::filesystem::path metrics;  // metrics.jsonl
  std::filesystem::path weights;  // model.pt: the final weights
};

RunPaths run_paths(const config::ExperimentConfig& config);

// Creates the run directory and writes config.yaml. A metrics.jsonl left by an
// earlier run is kept as metrics.N.jsonl rather than overwritten, unless the
// run is `resuming` it: then the run appends to it. Throws UserError when the
// directory cannot be created or written.
RunPaths prepare_run_dir(const config::ExperimentConfig& config, bool resuming = false);

}  // namespace gputrain::report
