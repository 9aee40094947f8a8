#include "gputrain/report/run_dir.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/config/output_paths.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/report/event_file.h"

namespace gputrain::report {

namespace fs = std::filesystem;

namespace {

// `dir`/`pattern` with the smallest N >= 1 that names nothing yet.
fs::path first_free(const fs::path& dir, const char* pattern) {
  int n = 1;
  while (fs::exists(dir / fmt::format(fmt::runtime(pattern), n))) ++n;
  return dir / fmt::format(fmt::runtime(pattern), n);
}

// TensorBoard shows all event files of a directory as one run, so a fresh
// run's curves would continue an earlier run's: those files go to events.N/,
// which TensorBoard lists as a run of its own.
void move_event_files_aside(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().filename().string().rfind(kEventFilePrefix, 0) == 0) files.push_back(entry.path());
  }
  if (files.empty()) return;
  const fs::path aside = first_free(dir, "events.{}");
  fs::create_directory(aside, error);
  for (const fs::path& file : files) {
    if (!error) fs::rename(file, aside / file.filename(), error);
  }
  if (error) {
    throw UserError(
        fmt::format("{}: cannot keep the previous TensorBoard event files: {}", aside.string(), error.message()));
  }
}

}  // namespace

RunPaths run_paths(const fs::path& dir) {
  RunPaths paths;
  paths.dir = dir;
  paths.config = paths.dir / "config.yaml";
  paths.log = paths.dir / "train.log";
  paths.metrics = paths.dir / "metrics.jsonl";
  paths.weights = paths.dir / plan::kWeightsFile;
  paths.run_info = paths.dir / "run.json";
  paths.device_report = paths.dir / "device.json";
  paths.report = paths.dir / "report.html";
  return paths;
}

RunDirOptions run_dir_options(const plan::RunPlan& run, bool resuming) {
  const config::ExperimentConfig config = plan::config_with_resolved_batch(run);
  return {config::run_directory(config),
          "# resolved by gputrain; `gputrain train --config` accepts this file as is\n" + config::dump_config(config),
          resuming};
}

RunPaths prepare_run_dir(const RunDirOptions& options) {
  const RunPaths paths = run_paths(options.dir);
  if (!options.resuming) {
    if (const std::string problem = plan::finished_run_problem(paths.dir); !problem.empty()) throw UserError(problem);
  }
  std::error_code error;
  fs::create_directories(paths.dir, error);
  if (error) {
    throw UserError(fmt::format("{}: cannot create the run directory ({}). Choose another output.dir or --output.",
                                paths.dir.string(), error.message()));
  }
  if (!options.resuming && fs::exists(paths.metrics)) {
    fs::rename(paths.metrics, first_free(paths.dir, "metrics.{}.jsonl"), error);
    if (error)
      throw UserError(fmt::format("{}: cannot keep the previous metrics: {}", paths.metrics.string(), error.message()));
  }
  if (!options.resuming) move_event_files_aside(paths.dir);
  // The weights are written last, after the training; a name taken by a
  // directory would lose them, so it is refused before the run starts.
  if (fs::is_directory(paths.weights, error)) {
    throw UserError(
        fmt::format("{}: is a directory, so the final weights could not be saved there. Move it away or "
                    "choose another output.dir or --output.",
                    paths.weights.string()));
  }
  std::ofstream out(paths.config, std::ios::binary | std::ios::trunc);
  out << options.resolved_config;
  if (!out.flush()) {
    throw UserError(
        fmt::format("{}: cannot write the resolved config. Is the output directory writable?", paths.config.string()));
  }
  return paths;
}

RunDirLock::RunDirLock(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    throw UserError(fmt::format("{}: cannot create the run directory ({}). Choose another output.dir or --output.",
                                dir.string(), error.message()));
  }
  const fs::path path = dir / plan::kRunLockFile;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw UserError(fmt::format("{}: cannot open the run directory's lock file: {}. Is the output directory writable?",
                                path.string(), std::strerror(errno)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int cause = errno;
    ::close(fd_);
    fd_ = -1;
    if (cause == EWOULDBLOCK) throw UserError(plan::run_dir_in_use(dir, path));
    throw UserError(fmt::format("{}: cannot lock the run directory: {}", path.string(), std::strerror(cause)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the pid; a second run's message then says "unknown".
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace gputrain::report
