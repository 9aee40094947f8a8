#include "signals.h"

#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>

#include "gputrain/common/error.h"

namespace gputrain::app {

namespace {

train::StopToken g_token;
std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int signal) {
  if (g_token.request_stop()) {
    static const char kMessage[] = "\ngputrain: second stop signal, exiting now; the last complete checkpoint stands\n";
    (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    ::_exit(130);
  }
  g_stop_signal.store(signal);
}

extern "C" void on_checkpoint_signal(int) { g_token.request_checkpoint(); }

// Slurm's notice before it ends a job (`#SBATCH --signal=USR1@90`).
extern "C" void on_preemption_signal(int signal) {
  g_token.request_preemption();
  g_stop_signal.store(signal);
}

// Before training starts there is nothing to finish or save: say so and exit.
extern "C" void on_setup_signal(int) {
  static const char kMessage[] = "\ngputrain: stopped by a signal before training started; nothing was written\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(130);
}

// A preemption notice then has nothing to checkpoint either; 75, as after
// training's checkpoint, lets the batch script requeue the job.
extern "C" void on_setup_preemption(int) {
  static const char kMessage[] =
      "\ngputrain: preempted (SIGUSR1) before training started; nothing was written; exit code 75 asks for a "
      "requeue\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(static_cast<int>(ExitCode::kPreempted));
}

// What each handled signal does: a handler, SIG_IGN or SIG_DFL. Read by the
// signal thread, so it stays ours whatever a library installs meanwhile.
std::array<std::atomic<void (*)(int)>, NSIG> g_actions{};
// SIGHUP's action as the process started (SIG_DFL, or SIG_IGN under nohup).
std::atomic<void (*)(int)> g_started_hangup{SIG_DFL};

// The signals gputrain handles are blocked in every thread of a training
// process, and taken with sigwait by one thread that does nothing else, which
// runs our action for them. So no thread inside CUDA, cuDNN or NCCL is
// interrupted, and no handler that a library installs for a while sees them:
// cuDNN's runtime compiler (NVRTC) installs its own while it compiles a kernel
// for a new shape, and a SIGTERM at that moment ended a run on an H100 with
// exit code 4 or a segmentation fault, with no checkpoint
// (scripts/bench/results/gpu-2026-11-25-*).
constexpr std::array<int, 4> kHandled{SIGINT, SIGTERM, SIGHUP, SIGUSR1};

// Set by hand_signals_to_launcher: the signal thread runs the process's
// installed disposition (the launcher's own handler while it runs) instead of ours.
std::atomic<bool> g_follow_installed{false};

void (*installed_action(int signal))(int) {
  struct sigaction current {};
  sigaction(signal, nullptr, &current);
  return current.sa_handler;
}

void take_signals() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int signal : kHandled) sigaddset(&handled, signal);
  for (;;) {
    int signal = 0;
    if (sigwait(&handled, &signal) != 0) continue;
    void (*action)(int) = g_follow_installed.load() ? installed_action(signal) : g_actions[signal].load();
    if (action == SIG_IGN) continue;
    if (action != SIG_DFL) {
      action(signal);
      continue;
    }
    // The default action (train.on_sigint: none): the signal again, unblocked here, ends the process.
    std::signal(signal, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(signal);
  }
}

// The action for the signal thread, and as the process's disposition too: a
// thread that unblocks the signals on its own still runs ours, never the
// setup handler's "nothing was written" exit in the middle of training.
void set_action(int signal, void (*action)(int)) {
  g_actions[signal].store(action);
  struct sigaction next {};
  next.sa_handler = action;
  sigemptyset(&next.sa_mask);
  next.sa_flags = SA_RESTART;  // a signal must not fail a read or write in progress
  sigaction(signal, &next, nullptr);
}

void install(int signal, void (*handler)(int)) {
  // A shell starts background jobs with SIGINT ignored; so does the user who
  // asked for it. Keep that rather than stop on a Ctrl-C meant for another job.
  if (signal == SIGINT && g_actions[signal].load() == SIG_IGN) return;
  set_action(signal, handler);
}

}  // namespace

void install_setup_signal_handlers(bool checkpoint_requests) {
  for (int signal : kHandled) {  // as the process started: SIGINT may be ignored (install keeps that)
    struct sigaction current {};
    sigaction(signal, nullptr, &current);
    g_actions[signal].store(current.sa_handler);
  }
  install(SIGINT, on_setup_signal);
  install(SIGTERM, on_setup_signal);
  install(SIGUSR1, on_setup_preemption);
  if (checkpoint_requests) install(SIGHUP, on_checkpoint_signal);
}

void install_first_signal_handlers() {
  struct sigaction started {};
  sigaction(SIGHUP, nullptr, &started);
  g_started_hangup.store(started.sa_handler);
  install_setup_signal_handlers(/*checkpoint_requests=*/true);
  sigset_t setup;
  sigemptyset(&setup);
  for (int signal : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&setup, signal);
  sigprocmask(SIG_UNBLOCK, &setup, nullptr);
}

void restore_hangup_action() {
  void (*action)(int) = g_started_hangup.load();
  set_action(SIGHUP, action);
  if (g_token.take_checkpoint_request() && action == SIG_DFL) ::raise(SIGHUP);
}

void route_training_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    sigset_t handled;
    sigemptyset(&handled);
    for (int signal : kHandled) sigaddset(&handled, signal);
    pthread_sigmask(SIG_BLOCK, &handled, nullptr);  // before any thread starts: each inherits it
    std::thread(take_signals).detach();
  });
}

void hand_signals_to_launcher() { g_follow_installed.store(true); }

train::StopToken& install_signal_handlers(config::OnSigint on_sigint) {
  if (on_sigint != config::OnSigint::kNone) {
    install(SIGINT, on_stop_signal);
    install(SIGTERM, on_stop_signal);
  } else {
    for (int signal : {SIGINT, SIGTERM}) {
      if (g_actions[signal].load() == on_setup_signal) set_action(signal, SIG_DFL);
    }
  }
  install(SIGHUP, on_checkpoint_signal);
  install(SIGUSR1, on_preemption_signal);
  return g_token;
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "";
  }
}

std::string stop_signal_name() { return signal_name(g_stop_signal.load()); }

}  // namespace gputrain::app
