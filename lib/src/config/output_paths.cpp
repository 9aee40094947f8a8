#include "gputrain/config/output_paths.h"

namespace gputrain::config {

std::filesystem::path run_directory(const ExperimentConfig& config) {
  return std::filesystem::path(config.output.dir) / config.name;
}

std::filesystem::path checkpoint_directory(const ExperimentConfig& config) {
  return run_directory(config) / config.checkpoint.dir;
}

}  // namespace gputrain::config
