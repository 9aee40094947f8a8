#include "gputrain/parallel/launcher.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "gputrain/common/error.h"
#include "gputrain/common/process.h"
#include "gputrain/parallel/strategy.h"

namespace gputrain::parallel {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<int, 4> kForwarded{SIGINT, SIGTERM, SIGHUP, SIGUSR1};
constexpr std::array<const char*, 6> kRankVariables{"RANK",        "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                    "MASTER_ADDR", "MASTER_PORT"};
// Inherited from an outer torchrun, they would send the workers to its store.
constexpr std::array<const char*, 2> kDropped{"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"};

int signal_pipe_write = -1;  // the handler's only state

extern "C" void note_signal(int signal) {
  const auto byte = static_cast<unsigned char>(signal);
  const ssize_t written = write(signal_pipe_write, &byte, 1);
  (void)written;  // a full pipe already holds enough wake-ups
}

// While alive, the forwarded signals are caught and their numbers read from a
// pipe by the waiting loop; the previous handlers come back afterwards.
class SignalPipe {
 public:
  SignalPipe() {
    GPUTRAIN_CHECK(signal_pipe_write < 0, "only one launcher runs at a time");
    if (pipe2(fds_.data(), O_CLOEXEC | O_NONBLOCK) != 0) {
      throw DistributedError(fmt::format("launcher: cannot create a pipe: {}", std::strerror(errno)));
    }
    signal_pipe_write = fds_[1];
    struct sigaction action {};
    action.sa_handler = note_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kForwarded.size(); ++i) sigaction(kForwarded[i], &action, &previous_[i]);
  }
  ~SignalPipe() {
    for (std::size_t i = 0; i < kForwarded.size(); ++i) sigaction(kForwarded[i], &previous_[i], nullptr);
    signal_pipe_write = -1;
    close(fds_[0]);
    close(fds_[1]);
  }
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Waits up to `timeout` for signals; returns those that came.
  std::vector<int> wait(std::chrono::milliseconds timeout) {
    pollfd fd{fds_[0], POLLIN, 0};
    std::vector<int> signals;
    if (poll(&fd, 1, static_cast<int>(timeout.count())) <= 0) return signals;
    unsigned char byte = 0;
    while (read(fds_[0], &byte, 1) == 1) signals.push_back(byte);
    return signals;
  }

 private:
  std::array<int, 2> fds_{-1, -1};
  std::array<struct sigaction, kForwarded.size()> previous_{};
};

// A port nobody listens on now; rank 0 binds it moments later.
int64_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  if (fd >= 0) close(fd);
  if (!ok) throw DistributedError(fmt::format("launcher: cannot find a free TCP port: {}", std::strerror(error)));
  return ntohs(address.sin_port);
}

bool is_variable(const std::string& entry, const char* name) {
  const std::size_t n = std::strlen(name);
  return entry.size() > n && entry.compare(0, n, name) == 0 && entry[n] == '=';
}

bool has_variable(const std::vector<std::string>& environment, const char* name) {
  return std::any_of(environment.begin(), environment.end(),
                     [name](const std::string& entry) { return is_variable(entry, name); });
}

bool is_launch_variable(const std::string& entry) {
  auto named = [&entry](const char* name) { return is_variable(entry, name); };
  return std::any_of(kRankVariables.begin(), kRankVariables.end(), named) ||
         std::any_of(kDropped.begin(), kDropped.end(), named);
}

struct Worker {
  int64_t rank = 0;
  pid_t pid = -1;
  bool running = true;
  int status = 0;  // waitpid's, once it has ended
};

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
}

// Whether a worker ended on a signal passed on to it: killed by it, exiting
// with 130 after handling it, or with 75 after a preemption notice (SIGUSR1).
bool stopped_by(int status, int forwarded) {
  if (forwarded == 0) return false;
  if (WIFSIGNALED(status)) return WTERMSIG(status) == forwarded;
  const int code = WEXITSTATUS(status);
  return code == static_cast<int>(ExitCode::kInterrupted) ||
         (forwarded == SIGUSR1 && code == static_cast<int>(ExitCode::kPreempted));
}

pid_t spawn(const LauncherOptions& options, int64_t rank, int64_t port, int64_t restart) {
  std::vector<std::string> environment;
  for (const auto& entry : options.environment) {
    if (!is_launch_variable(entry)) environment.push_back(entry);
  }
  const std::array<std::string, 6> values{std::to_string(rank),          std::to_string(rank),
                                          std::to_string(options.nproc), std::to_string(options.nproc),
                                          options.master_addr,           std::to_string(port)};
  for (std::size_t i = 0; i < kRankVariables.size(); ++i) {
    environment.push_back(std::string(kRankVariables[i]) + "=" + values[i]);
  }
  // As torchrun: which start of the group this is (train.resume: auto resumes after the first).
  environment.push_back("TORCHELASTIC_RESTART_COUNT=" + std::to_string(restart));
  if (!has_variable(options.environment, "OMP_NUM_THREADS")) environment.emplace_back("OMP_NUM_THREADS=1");
  std::vector<std::string> arguments{options.executable};
  arguments.insert(arguments.end(), options.arguments.begin(), options.arguments.end());
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  auto pointers = [](std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  };
  std::vector<char*> argv = pointers(arguments);
  std::vector<char*> envp = pointers(environment);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw DistributedError(fmt::format("launcher: cannot start rank {}: {}", rank, std::strerror(errno)));
  if (pid > 0) return pid;
  // A process group of its own: a Ctrl-C at the terminal reaches the
  // launcher only, which forwards it once. The worker dies with the launcher.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) _exit(1);
  for (int signal : kForwarded) ::signal(signal, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(argv[0], argv.data(), envp.data());
  const char message[] = "launcher: cannot execute the worker binary\n";
  const ssize_t written = write(STDERR_FILENO, message, sizeof(message) - 1);
  (void)written;
  _exit(127);
}

// Whether the process is stopped (SIGSTOP, a debugger's trace stop): such a
// worker cannot find out that the others failed, however long it is given.
bool is_stopped(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t name_end = text.rfind(')');  // the state follows the command's name, which may hold spaces
  if (name_end == std::string::npos || name_end + 2 >= text.size()) return false;
  const char state = text[name_end + 2];
  return state == 'T' || state == 't';
}

// The running workers that are stopped, named for the log.
std::vector<std::string> stopped_workers(const std::vector<Worker>& workers) {
  std::vector<std::string> stopped;
  for (const auto& w : workers) {
    if (w.running && is_stopped(w.pid)) stopped.push_back(fmt::format("rank {} (pid {})", w.rank, w.pid));
  }
  return stopped;
}

void signal_running(std::vector<Worker>& workers, int signal) {
  for (const auto& w : workers) {
    if (w.running) kill(w.pid, signal);
  }
}

}  // namespace

std::vector<StrategyPlan> check_local_workers(const StrategyKeys& keys, const device::DevicePlan& devices,
                                              int64_t nproc) {
  if (devices.kind == device::DeviceKind::kCuda && nproc > static_cast<int64_t>(devices.gpus.size())) {
    spdlog::warn(
        "launcher: {} workers share {} GPU{}; NCCL runs one rank per GPU and refuses more (ddp.backend: gloo "
        "does not)",
        nproc, devices.gpus.size(), devices.gpus.size() == 1 ? "" : "s");
  }
  std::vector<StrategyPlan> plans;
  for (int64_t rank = 0; rank < nproc; ++rank) {
    LaunchInfo launch;
    launch.rank = rank;
    launch.local_rank = rank;
    launch.world_size = nproc;
    plans.push_back(plan_strategy(keys, devices, launch));
  }
  return plans;
}

namespace {

// How one start of the group ended.
struct GroupEnd {
  int code = 0;              // the launcher's exit code for it
  bool restartable = false;  // a worker failed on its own: not a signal passed on, not the user's input
};

GroupEnd run_group(const LauncherOptions& options, SignalPipe& signals, int64_t restart) {
  const int64_t port = options.master_port != 0 ? options.master_port : free_port();
  spdlog::info("launcher: {} workers, rendezvous at {}:{}{}", options.nproc, options.master_addr, port,
               restart > 0 ? fmt::format(" (restart {} of {})", restart, options.max_restarts) : "");
  std::vector<Worker> workers;
  try {
    for (int64_t rank = 0; rank < options.nproc; ++rank) {
      workers.push_back({rank, spawn(options, rank, port, restart)});
      spdlog::info("launcher: rank {} runs as pid {}", rank, workers.back().pid);
    }
  } catch (const Error&) {
    signal_running(workers, SIGKILL);
    for (const auto& w : workers) waitpid(w.pid, nullptr, 0);
    throw;
  }

  std::optional<std::size_t> failed;  // the first worker to fail
  int forwarded = 0;                  // the last signal passed on
  int escalation = 0;                 // after a failure: 0 waiting, 1 SIGTERM sent, 2 SIGKILL sent
  Clock::time_point next_step;
  std::size_t running = workers.size();
  while (running > 0) {
    for (int signal : signals.wait(std::chrono::milliseconds(50))) {
      spdlog::info("launcher: passing {} on to the workers", strsignal(signal));
      forwarded = signal;
      signal_running(workers, signal);
    }
    for (std::size_t i = 0; i < workers.size(); ++i) {
      Worker& w = workers[i];
      if (!w.running || waitpid(w.pid, &w.status, WNOHANG) != w.pid) continue;
      w.running = false;
      --running;
      if (w.status == 0 || failed) continue;
      failed = i;
      const auto grace = WIFSIGNALED(w.status) ? options.grace_after_a_death : options.grace;
      next_step = Clock::now() + grace;
      const std::string others = running > 0 ? fmt::format("; the other workers get {:g} s to stop on their own",
                                                           std::chrono::duration<double>(grace).count())
                                             : "";
      spdlog::log(stopped_by(w.status, forwarded) ? spdlog::level::warn : spdlog::level::err,
                  "launcher: rank {} (pid {}) {}{}", w.rank, w.pid, describe(w.status), others);
      const std::vector<std::string> stopped = stopped_workers(workers);
      if (!stopped.empty()) {
        spdlog::warn("launcher: {} {} stopped (SIGSTOP or a debugger) and cannot stop on its own: ending it now",
                     fmt::join(stopped, ", "), stopped.size() == 1 ? "is" : "are");
        next_step = Clock::now();
      }
    }
    if (failed && running > 0 && escalation < 2 && Clock::now() >= next_step) {
      ++escalation;
      spdlog::warn("launcher: {} the workers still running", escalation == 1 ? "terminating" : "killing");
      signal_running(workers, escalation == 1 ? SIGTERM : SIGKILL);
      // A stopped worker (SIGSTOP, a debugger) acts on SIGTERM only once continued.
      if (escalation == 1) signal_running(workers, SIGCONT);
      next_step = Clock::now() + options.grace;
    }
  }
  if (!failed) return {};
  const Worker& w = workers[*failed];
  if (stopped_by(w.status, forwarded)) {
    // Killed by it: the worker had not installed its handlers yet, nor anything to save; it ends as it would have.
    return {WIFEXITED(w.status) ? WEXITSTATUS(w.status) : stop_exit_code(forwarded), false};
  }
  if (WIFEXITED(w.status)) {
    const int code = WEXITSTATUS(w.status);
    return {code, code != static_cast<int>(ExitCode::kUserInput)};  // the same input fails the same way again
  }
  return {static_cast<int>(ExitCode::kRuntime), true};
}

}  // namespace

int run_local_workers(const LauncherOptions& options) {
  SignalPipe signals;
  if (!has_variable(options.environment, "OMP_NUM_THREADS")) {
    // As torchrun does: N processes of OpenMP threads that spin-wait for one
    // another slow CPU training down by orders of magnitude.
    spdlog::info("launcher: OMP_NUM_THREADS=1 for every worker (set OMP_NUM_THREADS to choose)");
  }
  for (int64_t restart = 0;; ++restart) {
    const GroupEnd end = run_group(options, signals, restart);
    if (end.code == 0 || !end.restartable || restart >= options.max_restarts) {
      if (end.restartable && options.max_restarts > 0) {
        spdlog::error("launcher: the workers failed after {} restarts (--max-restarts {})", restart,
                      options.max_restarts);
      }
      return end.code;
    }
    spdlog::warn(
        "launcher: restarting every worker ({} of --max-restarts {}); train.resume: auto continues from "
        "the newest intact checkpoint",
        restart + 1, options.max_restarts);
  }
}

}  // namespace gputrain::parallel
