#pragma once
// Runs the real gputrain binary, or a piece of test code, as a child process:
// for CLI tests, and for conditions a test cannot set up in its own process
// (a file size limit that stands in for a full disk, giving up root).
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/paths.h"
#include "support/temp_dir.h"

namespace gputrain::testing {

// A socket bound to a free port; listening on it makes the port busy.
struct PortHolder {
  PortHolder();
  ~PortHolder();
  PortHolder(const PortHolder&) = delete;
  PortHolder& operator=(const PortHolder&) = delete;
  int fd = -1;
  int port = 0;
};
// A port free a moment ago (the holder is closed again).
int free_port();

struct ProcessResult {
  int exit_code = -1;  // 128 + the signal when a signal ended it, as a shell reports it
  std::string out;     // stdout (run_in_child: what the body returned)
  std::string err;     // stderr
};

// Runs in the child after fork and before exec (or the body). A setup that
// cannot do its job exits with kSetupFailed, which the test reports as skipped.
using ChildSetup = std::function<void()>;
constexpr int kSetupFailed = 77;

// Writes that would make a file larger than `bytes` fail with EFBIG, as on a
// full disk (RLIMIT_FSIZE, with SIGXFSZ ignored so that write() returns the error).
ChildSetup file_size_limit(std::size_t bytes);
// Gives up root for user and group nobody (65534): root ignores permission
// bits, so tests of unreadable files need an ordinary user. Without root, does nothing.
ChildSetup without_root();

// `program` (default kGputrainBinary) with `args`, started in `cwd` (default: the source tree)
// with `env` added to (or, for an empty value, removed from) the environment;
// stdout and stderr go to files that can be read while it runs. Killed, if
// still running, when the object dies. With GPUTRAIN_TEST_CHILD_ONEDNN_ISA set
// (scripts/test.sh, label crossproc), the child gets it as ONEDNN_MAX_CPU_ISA
// unless `env` says otherwise.
class GputrainProcess {
 public:
  explicit GputrainProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                           const std::string& cwd = kSourceDir, const ChildSetup& setup = {},
                           const std::string& program = kGputrainBinary);
  ~GputrainProcess();
  GputrainProcess(const GputrainProcess&) = delete;
  GputrainProcess& operator=(const GputrainProcess&) = delete;

  pid_t pid() const { return pid_; }
  void send(int signal) const;
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
                           const std::string& cwd = kSourceDir, const ChildSetup& setup = {});

// Runs `body` in a forked child after `setup`; exit code 0 and the body's
// result in `out` when it returns, 1 when it throws (the message in `out`).
ProcessResult run_in_child(const std::function<std::string()>& body, const ChildSetup& setup = {});

// A generated Fashion-MNIST-like set of `train` and `test` images (`datasets make-idx`, in dir/idx) exported as an
// image folder of `format` (`datasets export`, png or jpeg) to dir/images, which is returned.
std::filesystem::path make_image_folder(const std::filesystem::path& dir, const std::string& format, int train,
                                        int test);

// The Python of the venv scripts/setup.sh fills (torch, tensorboard, onnxruntime):
// $GPUTRAIN_VENV/bin/python, else ~/.cache/gputrain/venv/bin/python (as scripts/env.sh).
std::filesystem::path venv_python();

// Polls `condition` every 20 ms until it holds (true) or `timeout` passes (false).
bool wait_until(const std::function<bool()>& condition, std::chrono::seconds timeout = std::chrono::seconds(120));

}  // namespace gputrain::testing
