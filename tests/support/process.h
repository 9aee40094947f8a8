#pragma once
// Runs the real gputrain binary as a child process, for CLI tests.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace gputrain::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + the signal when a signal ended it, as a shell reports it
  std::string out;     // stdout
  std::string err;     // stderr
};

// GPUTRAIN_BINARY with `args` in `cwd` (default: the source tree), with `env`
// added to (or, for an empty value, removed from) the environment, running
// while the test sends it signals and watches its output.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
               const std::string& cwd = GPUTRAIN_SOURCE_DIR);
  ~ChildProcess();  // kills (SIGKILL) and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void send(int signal) const;
  // Waits for the child to end and returns what it did.
  ProcessResult wait();
  std::string err_so_far() const;

 private:
  TempDir capture_;
  pid_t pid_ = -1;
};

// Runs it to the end.
ProcessResult run_gputrain(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                           const std::string& cwd = GPUTRAIN_SOURCE_DIR);

// Polls `condition` every 20 ms until it holds (true) or `timeout` passes (false).
bool wait_until(const std::function<bool()>& condition, std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace gputrain::testing
