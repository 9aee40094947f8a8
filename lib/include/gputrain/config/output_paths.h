#pragma once
// Where a run writes, from its config: the one place that joins output.dir,
// name and checkpoint.dir.
#include <filesystem>

#include "gputrain/config/config.h"

namespace gputrain::config {

// <output.dir>/<name>/
std::filesystem::path run_directory(const ExperimentConfig& config);
// <output.dir>/<name>/<checkpoint.dir>/
std::filesystem::path checkpoint_directory(const ExperimentConfig& config);

}  // namespace gputrain::config
