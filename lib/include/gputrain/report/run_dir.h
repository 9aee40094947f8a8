#pragma once
// The run directory <output.dir>/<name>/: config.yaml, train.log, metrics.jsonl,
// run.json, device.json, report.html, model.pt and TensorBoard event files.
#include <filesystem>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/plan/outputs.h"
#include "gputrain/plan/run_plan.h"

namespace gputrain::report {

struct RunPaths {
  std::filesystem::path dir;
  std::filesystem::path config;         // the resolved config, as `gputrain config` prints it
  std::filesystem::path log;            // train.log
  std::filesystem::path metrics;        // metrics.jsonl
  std::filesystem::path weights;        // model.pt: the final weights
  std::filesystem::path run_info;       // run.json: strategy, batch splits, status
  std::filesystem::path device_report;  // device.json: `gputrain info --json` at the start
  std::filesystem::path report;         // report.html
};

RunPaths run_paths(const std::filesystem::path& dir);

struct RunDirOptions {
  std::filesystem::path dir;    // <output.dir>/<name>
  std::string resolved_config;  // config.yaml's text: the config as `gputrain config` prints it
  bool resuming = false;        // the run continues an earlier run's metrics and curves
};
// The run directory of `run`, holding its config as plan::config_with_resolved_batch gives it.
RunDirOptions run_dir_options(const plan::RunPlan& run, bool resuming);

// Creates the run directory and writes config.yaml. A fresh run in a finished
// run's directory is refused (UserError, plan::finished_run_problem) before anything
// in it changes. A metrics.jsonl left by an
// earlier run is kept as metrics.N.jsonl rather than overwritten, and its
// TensorBoard event files move to events.N/ (so that its curves stay apart),
// unless the run is resuming it: then the run appends to both. Throws
// UserError when the directory cannot be created or written, or model.pt is a
// directory.
RunPaths prepare_run_dir(const RunDirOptions& options);

// An exclusive lock on a run directory: flock(2) on <dir>/.gputrain.lock (plan::kRunLockFile),
// which holds the owner's pid. The kernel releases it when the process ends,
// however it ends. Creates the directory (and nothing else in it) when missing.
// Throws UserError (exit 2) naming the holder's pid when another process holds it.
class RunDirLock {
 public:
  explicit RunDirLock(const std::filesystem::path& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace gputrain::report
