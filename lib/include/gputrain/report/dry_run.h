#pragma once
// `gputrain plan`: everything `train` would decide, found without training,
// and every problem that would stop it, each with where and how to fix it.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/parallel/strategy.h"

namespace gputrain::report {

// What app/ read from the command line and the environment.
struct DryRunRequest {
  std::vector<std::string> config;  // the experiment files (--config once or more), later over earlier
  std::vector<std::string> overrides;
  std::optional<int64_t> nproc;  // --nproc: plan the workers it would start
  parallel::LaunchInfo launch;   // what a launcher (torchrun, srun) told this process
  std::optional<std::string> cuda_visible_devices;
  bool resume = false;                    // train --resume: the run directory may hold a finished run
  std::string meminfo = "/proc/meminfo";  // where the host's free memory is read (tests name another)
};

struct DryRun {
  // Sections in the order train meets them: config, devices, strategy, batch,
  // data, fast_paths, memory, outputs. A section train could not reach (the
  // data after a missing data.root) is absent.
  nlohmann::ordered_json report = nlohmann::ordered_json::object();
  // Every problem that would stop `train`, each "where: what. How to fix".
  std::vector<std::string> problems;
};

// Loads the config and resolves the run as train does (plan::collect_run:
// devices, processes, strategy of each rank under --nproc, data sets,
// batches), then reports it with what train meets next: the model, its fast
// paths, one measured forward/backward/optimizer step for the memory estimate,
// and the checkpoint and run directories. Touches no file. A problem in one
// part does not stop the others that do not depend on it.
DryRun dry_run(const DryRunRequest& request);

// The report as aligned text, problems last.
std::string format_dry_run(const DryRun& dry);

}  // namespace gputrain::report
