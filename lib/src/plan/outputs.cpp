#include "gputrain/plan/outputs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "gputrain/checkpoint/store.h"
#include "gputrain/common/error.h"
#include "gputrain/config/config_errors.h"
#include "gputrain/config/load.h"
#include "gputrain/config/output_paths.h"

namespace gputrain::plan {

namespace {

namespace fs = std::filesystem;

// The nearest directory that exists at or above `path`.
fs::path existing_ancestor(fs::path path) {
  std::error_code error;
  path = fs::absolute(path, error);
  while (!path.empty() && !fs::exists(path, error) && path != path.parent_path()) path = path.parent_path();
  return path;
}

// Whether the run could create or write `dir` (run directory, checkpoints).
void check_writable(const fs::path& dir, const char* key) {
  const fs::path at = existing_ancestor(dir);
  std::error_code error;
  if (!fs::is_directory(at, error)) {
    throw UserError(
        fmt::format("{}: cannot be created: {} is a file, not a directory; choose another {} or move "
                    "the file away",
                    dir.string(), at.string(), key));
  }
  if (access(at.c_str(), W_OK | X_OK) != 0) {
    throw UserError(
        fmt::format("{}: cannot be written ({} is not writable by this user); choose another {} or fix "
                    "the directory's permissions",
                    dir.string(), at.string(), key));
  }
}

// "<dir>: another gputrain process ..." when one holds the lock, else "". Takes
// a shared lock for a moment: a lock held exclusively refuses it.
std::string lock_holder(const fs::path& run_dir) {
  const fs::path path = run_dir / kRunLockFile;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";  // no lock file: no run has held it
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the shared lock, if it was taken
  return held ? run_dir_in_use(run_dir, path) : "";
}

}  // namespace

OutputPlan plan_outputs(const config::ExperimentConfig& config) {
  OutputPlan outputs;
  outputs.run_dir = config::run_directory(config);
  outputs.checkpoint_dir = config::checkpoint_directory(config);
  outputs.tensorboard = config.train.tensorboard;
  outputs.monitor_ms = config.train.monitor_ms;
  outputs.mlflow = config.tracking.mlflow;
  outputs.params = config::flatten_config(config);
  return outputs;
}

std::vector<std::string> output_problems(const OutputPlan& outputs, bool resuming) {
  std::vector<std::string> problems;
  const bool run_dir_ok = config::collect_refusal(problems, [&] { check_writable(outputs.run_dir, "output.dir"); });
  // Checkpoints inside a run directory that cannot be made cannot be either: said once, of the run directory.
  const std::string run_dir = outputs.run_dir.lexically_normal().string();
  const bool inside = outputs.checkpoint_dir.lexically_normal().string().rfind(run_dir, 0) == 0;
  if (run_dir_ok || !inside) {
    config::collect_refusal(problems, [&] {
      check_writable(outputs.checkpoint_dir, "checkpoint.dir");
      if (!resuming) checkpoint::check_checkpoint_dir(outputs.checkpoint_dir);
    });
  }
  if (const std::string problem = finished_run_problem(outputs.run_dir); !resuming && !problem.empty()) {
    problems.push_back(problem);
  }
  // The weights are written last, after the training; a name taken by a
  // directory would lose them, so it is refused before the run starts.
  std::error_code error;
  if (const fs::path weights = outputs.run_dir / kWeightsFile; fs::is_directory(weights, error)) {
    problems.push_back(
        fmt::format("{}: is a directory, so the final weights could not be saved there. Move it away or "
                    "choose another output.dir or --output.",
                    weights.string()));
  }
  if (std::string problem = lock_holder(outputs.run_dir); !problem.empty()) problems.push_back(std::move(problem));
  return problems;
}

std::string finished_run_problem(const fs::path& run_dir) {
  std::error_code error;
  if (!fs::is_regular_file(run_dir / kWeightsFile, error)) return "";
  return fmt::format(
      "{}: holds a finished run (its model.pt): a new run would replace its config, report and checkpoints; "
      "continue it with --resume auto, or give this run another name (name:) or output.dir (--output)",
      run_dir.string());
}

std::string run_dir_in_use(const fs::path& run_dir, const fs::path& lock_file) {
  std::ifstream in(lock_file);
  std::string pid;
  std::getline(in, pid);
  return fmt::format(
      "{}: another gputrain process (pid {}) is running in this run directory; wait for it "
      "to end, or choose another name or output.dir (--output)",
      run_dir.string(), pid.empty() ? "unknown" : pid);
}

}  // namespace gputrain::plan
