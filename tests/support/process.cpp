#include "support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace gputrain::testing {

namespace {
std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

GputrainProcess::GputrainProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                                 const std::string& cwd, const std::string& program) {
  const auto out_path = capture_ / "stdout";
  const auto err_path = capture_ / "stderr";
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ > 0) return;
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  for (const auto& [key, value] : env) {
    if (value.empty()) {
      unsetenv(key.c_str());
    } else {
      setenv(key.c_str(), value.c_str(), 1);
    }
  }
  if (chdir(cwd.c_str()) != 0) _exit(127);
  std::vector<char*> argv;
  std::string binary = program;
  argv.push_back(binary.data());
  std::vector<std::string> copies(args);
  for (auto& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv(binary.c_str(), argv.data());
  _exit(127);
}

GputrainProcess::~GputrainProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string GputrainProcess::err_so_far() const { return slurp(capture_ / "stderr"); }

std::optional<ProcessResult> GputrainProcess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return result(status);
}

ProcessResult GputrainProcess::wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return result(status);
}

ProcessResult GputrainProcess::result(int status) const {
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(capture_ / "stdout");
  r.err = slurp(capture_ / "stderr");
  return r;
}

ProcessResult run_gputrain(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                           const std::string& cwd) {
  return GputrainProcess(args, env, cwd).wait();
}

}  // namespace gputrain::testing
