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

// The run as plan::collect_start resolved it for train (the config, or the
// checkpoint's under --resume, the devices, processes, strategy of each rank
// under --nproc, data sets, batches, the model, its fast paths, one measured
// step's memory, the run and checkpoint directories) and every problem it
// found, as a report; it decides nothing itself.
DryRun dry_run(const plan::CollectedStart& start);

// The report as aligned text, problems last.
std::string format_dry_run(const DryRun& dry);

}  // namespace gputrain::report
