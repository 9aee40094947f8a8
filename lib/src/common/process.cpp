#include "gputrain/common/process.h"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

#include "gputrain/common/error.h"

namespace gputrain {

namespace {

constexpr std::array<int, 4> kRelayed{SIGINT, SIGTERM, SIGHUP, SIGUSR1};

// The relay's state, read by its handler: lock-free atomics only.
std::atomic<bool> g_relaying{false};
std::atomic<pid_t> g_child{0};
std::atomic<int> g_stop_signal{0};
std::array<struct sigaction, kRelayed.size()> g_previous{};

extern "C" void relay_signal(int signal) {
  if (signal != SIGHUP) g_stop_signal.store(signal);
  const pid_t child = g_child.load();
  if (child > 0) kill(child, signal);
}

sigset_t relayed_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : kRelayed) sigaddset(&set, signal);
  return set;
}

// In the child, between fork and exec: async-signal-safe calls only.
void prepare_relayed_child(pid_t parent) {
  // A Ctrl-C at the terminal reaches the parent only, which passes it on
  // once: a second one would make `train` exit without its checkpoint.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);
  for (int signal : kRelayed) {
    struct sigaction current {};
    sigaction(signal, nullptr, &current);
    if (current.sa_handler == relay_signal) ::signal(signal, SIG_DFL);
  }
  // A SIGHUP passed on asks for a checkpoint, and the child has none to write
  // before its own handler is in place (`train` installs one): ignored until
  // then, not its default action, which ended the sweep's current run (129).
  ::signal(SIGHUP, SIG_IGN);
}

}  // namespace

int stop_exit_code(int signal) {
  return static_cast<int>(signal == SIGUSR1 ? ExitCode::kPreempted : ExitCode::kInterrupted);
}

SignalRelay::SignalRelay() {
  const bool already = g_relaying.exchange(true);
  if (already) throw Error(ExitCode::kRuntime, "internal error: only one signal relay runs at a time");
  g_stop_signal.store(0);
  struct sigaction action {};
  action.sa_handler = relay_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < kRelayed.size(); ++i) {
    sigaction(kRelayed[i], nullptr, &g_previous[i]);
    if (kRelayed[i] == SIGINT && g_previous[i].sa_handler == SIG_IGN) continue;
    sigaction(kRelayed[i], &action, nullptr);
  }
}

SignalRelay::~SignalRelay() {
  for (std::size_t i = 0; i < kRelayed.size(); ++i) sigaction(kRelayed[i], &g_previous[i], nullptr);
  g_relaying.store(false);
}

int SignalRelay::stop_signal() const { return g_stop_signal.load(); }

ChildOutput run_child(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) {
    throw Error(ExitCode::kRuntime, fmt::format("cannot create a pipe for {}: {}", argv[0], std::strerror(errno)));
  }
  // Built before fork: after it, the child only execs.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const bool relaying = g_relaying.load();
  const pid_t parent = getpid();
  // Held back until the relay knows the child's pid, then passed on.
  const sigset_t relayed = relayed_set();
  sigset_t mask;
  sigprocmask(SIG_BLOCK, &relayed, &mask);
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    close(fds[0]);
    close(fds[1]);
    throw Error(ExitCode::kRuntime, fmt::format("cannot start {}: {}", argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    if (relaying) prepare_relayed_child(parent);
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv(args[0], args.data());
    _exit(127);
  }
  g_child.store(pid);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  close(fds[1]);
  ChildOutput result;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      result.out.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  // Waited for without reaping first, so that the relay never signals a pid
  // that another process has taken over.
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  g_child.store(0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (relaying && WTERMSIG(status) == g_stop_signal.load()) {
    result.exit_code = stop_exit_code(WTERMSIG(status));
  } else {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

std::optional<double> seconds_since_process_start() {
  std::ifstream in("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 (the command name) may hold spaces and parentheses: the fields
  // after its closing parenthesis start with field 3.
  const std::size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long start_ticks = 0;
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  timespec now{};
  // Field 22, starttime: clock ticks after boot, on the clock CLOCK_BOOTTIME reads.
  if (!(fields >> start_ticks) || ticks_per_s <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return std::nullopt;
  const double since_boot = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  return since_boot - static_cast<double>(start_ticks) / static_cast<double>(ticks_per_s);
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace gputrain
