#pragma once
// A child process whose standard output the parent reads: `gputrain sweep`
// runs `gputrain train` this way and takes its result line.
#include <string>
#include <vector>

namespace gputrain {

struct ChildOutput {
  int exit_code = 0;  // the child's; 128 + N when signal N ended it
  std::string out;    // all it wrote to standard output
};

// Runs argv[0] (a path) with `argv`, standard error and input inherited, and
// waits for it. Throws Error (runtime) when it cannot be started.
ChildOutput run_child(const std::vector<std::string>& argv);

// This machine's host name; "localhost" when it has none.
std::string host_name();

}  // namespace gputrain
