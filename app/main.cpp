// gputrain's entry point: the command line, without test seams.
#include "commands.h"
#include "signals.h"

namespace {

// The stop and preemption handlers go in before anything else runs: the
// dynamic loader runs LibTorch's static initialisers (about half a second)
// before main, and a preemption notice (SIGUSR1) in that time took the
// default action, exit code 138, on which a requeue script drops the job.
// The executable's .preinit_array runs before any shared library's
// initialisers; this only calls sigaction and writes constant-initialised atomics.
extern "C" void install_handlers_first(int, char**, char**) { gputrain::app::install_first_signal_handlers(); }
__attribute__((section(".preinit_array"), used)) void (*install_handlers_first_entry)(int, char**,
                                                                                      char**) = install_handlers_first;

}  // namespace

int main(int argc, char** argv) { return gputrain::app::run_cli(argc, argv); }
