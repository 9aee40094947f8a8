#include "support/process.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <thread>

namespace gputrain::testing {

namespace {
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }
}  // namespace

PortHolder::PortHolder() {
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
}

PortHolder::~PortHolder() { close(fd); }

int free_port() { return PortHolder().port; }

ChildSetup file_size_limit(std::size_t bytes) {
  return [bytes] {
    const rlimit limit{bytes, bytes};
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(kSetupFailed);
  };
}

ChildSetup without_root() {
  return [] {
    if (geteuid() != 0) return;
    constexpr uid_t kNobody = 65534;
    if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(kSetupFailed);
  };
}

GputrainProcess::GputrainProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                                 const std::string& cwd, const ChildSetup& setup, const std::string& program) {
  const auto out_path = capture_ / "stdout";
  const auto err_path = capture_ / "stderr";
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ > 0) return;
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  // scripts/test.sh's crossproc step: every child runs oneDNN's kernels for
  // another instruction set than the test's process, as another machine or
  // thread count may pick other algorithms; what holds only to the bit fails.
  if (const char* isa = std::getenv("GPUTRAIN_TEST_CHILD_ONEDNN_ISA")) setenv("ONEDNN_MAX_CPU_ISA", isa, 1);
  for (const auto& [key, value] : env) {
    if (value.empty()) {
      unsetenv(key.c_str());
    } else {
      setenv(key.c_str(), value.c_str(), 1);
    }
  }
  if (chdir(cwd.c_str()) != 0) _exit(127);
  // gputrain keeps an inherited SIGINT ignore (a shell's background job); the
  // child of a test run in the background must still see the test's SIGINT.
  signal(SIGINT, SIG_DFL);
  if (setup) setup();
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

void GputrainProcess::send(int signal) const {
  if (pid_ > 0) kill(pid_, signal);
}

std::string GputrainProcess::err_so_far() const { return read_text(capture_ / "stderr"); }

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
  r.exit_code = exit_code_of(status);
  r.out = read_text(capture_ / "stdout");
  r.err = read_text(capture_ / "stderr");
  return r;
}

ProcessResult run_gputrain(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                           const std::string& cwd, const ChildSetup& setup) {
  return GputrainProcess(args, env, cwd, setup).wait();
}

ProcessResult run_in_child(const std::function<std::string()>& body, const ChildSetup& setup) {
  // A pipe rather than a file: after without_root() the child may not write where we can.
  int channel[2];
  if (pipe(channel) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(channel[0]);
    if (setup) setup();
    int code = 0;
    std::string text;
    try {
      text = body();
    } catch (const std::exception& e) {
      text = e.what();
      code = 1;
    }
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = write(channel[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    _exit(code);
  }
  close(channel[1]);
  ProcessResult result;
  char buffer[4096];
  for (ssize_t n; (n = read(channel[0], buffer, sizeof buffer)) > 0;)
    result.out.append(buffer, static_cast<std::size_t>(n));
  close(channel[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = exit_code_of(status);
  return result;
}

bool wait_until(const std::function<bool()>& condition, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::filesystem::path make_image_folder(const std::filesystem::path& dir, const std::string& format, int train,
                                        int test) {
  const std::filesystem::path idx = dir / "idx", images = dir / "images";
  const ProcessResult made = run_gputrain({"datasets", "make-idx", "--out", idx.string(), "--train",
                                           std::to_string(train), "--test", std::to_string(test)});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  write_text(dir / "idx.yaml", "data: {dataset: fashion_mnist, root: " + idx.string() + "}\n");
  const ProcessResult exported = run_gputrain(
      {"datasets", "export", "--config", (dir / "idx.yaml").string(), "--format", format, "--out", images.string()});
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  return images;
}

std::filesystem::path venv_python() {
  if (const char* venv = std::getenv("GPUTRAIN_VENV")) return std::filesystem::path(venv) / "bin" / "python";
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base =
      cache ? std::filesystem::path(cache) : std::filesystem::path(home ? home : "/") / ".cache";
  return base / "gputrain" / "venv" / "bin" / "python";
}

}  // namespace gputrain::testing
