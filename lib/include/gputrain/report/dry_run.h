#pragma once
// `gputrain plan`: everything `train` would decide, found without training,
// and every problem that would stop it, each with where and how to fix it.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/plan/start.h"

namespace gputrain::report {

struct DryRun {
  // Sections in the order train meets them: config, devices, strategy, batch,
  // data, fast_paths, memory, outputs. A section train could not reach (the
  // data after a missing data.root) is absent.
  nlohmann::ordered_json report = nlohmann::ordered_json::object();
  // Every problem that would stop `train`, each "where: what. How to fix".
  std::vector<std::string> problems;
};

// Resolves the run as train would (plan::collect_start: the config, or the
// checkpoint's under --resume, the devices, processes, strategy of each rank
// under --nproc, data sets, batches), then reports it with what train meets
// next: the model, its fast paths, one measured forward/backward/optimizer
// step for the memory estimate, and the checkpoint and run directories.
// Touches no file. A problem in one part does not stop the others that do not
// depend on it.
DryRun dry_run(const plan::StartRequest& request);

// The report as aligned text, problems last.
std::string format_dry_run(const DryRun& dry);

}  // namespace gputrain::report
