#pragma once
// Runs the real gputrain binary as a child process, for CLI tests.
#include <map>
#include <string>
#include <vector>

namespace gputrain::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs GPUTRAIN_BINARY with `args` in `cwd` (default: the source tree), with
// `env` added to (or, for an empty value, removed from) the environment.
ProcessResult run_gputrain(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                           const std::string& cwd = GPUTRAIN_SOURCE_DIR);

}  // namespace gputrain::testing
