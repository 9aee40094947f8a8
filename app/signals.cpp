#include "signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

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

// Before training starts there is nothing to finish or save: say so and exit.
extern "C" void on_setup_signal(int) {
  static const char kMessage[] = "\ngputrain: stopped by a signal before training started; nothing was written\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(130);
}

bool handled_by(int signal, void (*handler)(int)) {
  struct sigaction current {};
  return sigaction(signal, nullptr, &current) == 0 && current.sa_handler == handler;
}

void install(int signal, void (*handler)(int)) {
  struct sigaction previous {};
  // A shell starts background jobs with SIGINT ignored; so does the user who
  // asked for it. Keep that rather than stop on a Ctrl-C meant for another job.
  if (signal == SIGINT && sigaction(signal, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) return;
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a signal must not fail a read or write in progress
  sigaction(signal, &action, nullptr);
}

}  // namespace

void install_setup_signal_handlers() {
  install(SIGINT, on_setup_signal);
  install(SIGTERM, on_setup_signal);
}

train::StopToken& install_signal_handlers(config::OnSigint on_sigint) {
  if (on_sigint != config::OnSigint::kNone) {
    install(SIGINT, on_stop_signal);
    install(SIGTERM, on_stop_signal);
  } else {
    for (int signal : {SIGINT, SIGTERM}) {
      if (handled_by(signal, on_setup_signal)) std::signal(signal, SIG_DFL);
    }
  }
  install(SIGHUP, on_checkpoint_signal);
  install(SIGUSR1, on_checkpoint_signal);
  return g_token;
}

std::string stop_signal_name() {
  switch (g_stop_signal.load()) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "";
  }
}

}  // namespace gputrain::app
