#pragma once
// Runs the real gputrain binary as a child process, for CLI tests.
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace gputrain::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string out;     // stdout
  std::string err;     // stderr
};

// `program` (default GPUTRAIN_BINARY) with `args`, started in `cwd` (default:
// the source tree) with `env` added to (or, for an empty value, removed from)
// the environment; stdout and stderr go to files that can be read while it
// runs. Killed, if still running, when the object dies.
class GputrainProcess {
 public:
  explicit GputrainProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                           const std::string& cwd = GPUTRAIN_SOURCE_DIR, const std::string& program = GPUTRAIN_BINARY);
  ~GputrainProcess();
  GputrainProcess(const GputrainProcess&) = delete;
  GputrainProcess& operator=(const GputrainProcess&) = delete;

  pid_t pid() const { return pid_; }
  std::string err_so_far() const;
  // Waits up to `timeout` for the process to end: nullopt if it still runs.
  std::optional<ProcessResult> wait_for(std::chrono::milliseconds timeout);
  ProcessResult wait();

 private:
  ProcessResult result(int status) const;

  TempDir capture_{"gputrain-proc"};
  pid_t pid_ = -1;
};

// Runs it to the end.
ProcessResult run_gputrain(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                           const std::string& cwd = GPUTRAIN_SOURCE_DIR);

}  // namespace gputrain::testing
