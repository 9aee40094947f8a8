#pragma once
// Where a training run writes, what it records there, and whether it may: resolved and checked
// before anything is touched, by train and `gputrain plan` alike, so that a
// refused run leaves an earlier run's files as they were.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gputrain/config/config.h"

namespace gputrain::plan {

// The lock file a run holds in its run directory (report::RunDirLock), and its final weights.
inline constexpr const char* kRunLockFile = ".gputrain.lock";
inline constexpr const char* kWeightsFile = "model.pt";

struct OutputPlan {
  std::filesystem::path run_dir;              // <output.dir>/<name>/
  std::filesystem::path checkpoint_dir;       // <run dir>/<checkpoint.dir>/
  bool tensorboard = false;                   // train.tensorboard: event files in the run directory
  int64_t monitor_ms = 0;                     // train.monitor_ms: the GPUs sampled this often; 0: not
  config::MlflowConfig mlflow;                // tracking.mlflow as written (MLFLOW_TRACKING_URI may give its uri)
  std::map<std::string, std::string> params;  // the config's keys and values, as a tracking server logs them
};
OutputPlan plan_outputs(const config::ExperimentConfig& config);

// Every reason a run (a fresh one unless `resuming`) may not write where
// `outputs` says, each "where: what; how to fix": a directory that cannot be
// created or written, a finished run (its model.pt) a fresh run would
// replace, a checkpoint directory holding files that are not checkpoints, a
// model.pt that is a directory, another gputrain process holding the run
// directory's lock. Creates nothing.
std::vector<std::string> output_problems(const OutputPlan& outputs, bool resuming);

// Why a fresh run may not use `run_dir`: it holds a finished run (a
// model.pt), whose config, report and checkpoints the run would replace.
// Empty when it may.
std::string finished_run_problem(const std::filesystem::path& run_dir);

// "<dir>: another gputrain process (pid N) is running in this run directory;
// ...", the pid read from the lock file `lock_file`.
std::string run_dir_in_use(const std::filesystem::path& run_dir, const std::filesystem::path& lock_file);

}  // namespace gputrain::plan
