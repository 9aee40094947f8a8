#pragma once
// A child process whose standard output the parent reads: `gputrain sweep`
// runs `gputrain train` this way and takes its result line.
#include <optional>
#include <string>
#include <vector>

namespace gputrain {

struct ChildOutput {
  // The child's; 128 + N when signal N ended it, except a stop signal a
  // SignalRelay passed on: that one's stop_exit_code.
  int exit_code = 0;
  std::string out;    // all it wrote to standard output
  double wall_s = 0;  // from just before the child was started to its exit: the run's end-to-end time
};

// The exit code of a run a stop signal ended: 75 (requeue me) for a
// preemption notice (SIGUSR1), 130 for the others. A child that the signal
// passed on to it kills before it can handle one (in its first milliseconds,
// while its libraries load) had nothing to save, and ends with it too.
int stop_exit_code(int signal);

// Runs argv[0] (a path) with `argv`, standard error and input inherited, and
// waits for it. Throws Error (runtime) when it cannot be started. While a
// SignalRelay lives, the child runs in a process group of its own (a Ctrl-C
// at the terminal reaches the parent only, which passes it on once) and gets
// SIGTERM when the parent dies.
ChildOutput run_child(const std::vector<std::string>& argv);

// While alive, SIGINT, SIGTERM, SIGHUP and SIGUSR1 are caught and passed on to
// the child run_child waits for, as `train --nproc` does for its workers; the
// previous handlers come back afterwards. SIGINT stays ignored where it was
// (a shell's background job). One relay at a time.
class SignalRelay {
 public:
  SignalRelay();
  ~SignalRelay();
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  // The last stop signal (SIGINT, SIGTERM or SIGUSR1) that came, with or
  // without a child to pass it on to; 0 when none did. SIGHUP (write a
  // checkpoint and carry on) is passed on only.
  int stop_signal() const;
};

// Seconds since this process started (the kernel's start time of the
// process, which has a resolution of 1/100 s), so that a figure can count what
// ran before main: loading LibTorch and the CUDA libraries. nullopt where
// /proc/self/stat cannot be read.
std::optional<double> seconds_since_process_start();

// This machine's host name; "localhost" when it has none.
std::string host_name();

}  // namespace gputrain
