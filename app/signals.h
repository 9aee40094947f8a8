#pragma once
// Caffe-style signal handling for `train`: the handlers only set flags in a
// StopToken, which the trainer polls at optimizer-step boundaries.
//   SIGINT, SIGTERM  stop after the current step (train.on_sigint: checkpoint
//                    writes one first, stop does not; none installs nothing,
//                    so the signal's default action ends the process). A
//                    second one while stopping exits with 130 at once; a
//                    checkpoint write in progress is abandoned, never renamed
//                    into place.
//                    SIGINT stays ignored where the process started with it
//                    ignored (a shell's background job).
//   SIGHUP           write a checkpoint at the next step boundary and carry on.
//   SIGUSR1          a preemption notice (Slurm's --signal=USR1@SECONDS): finish
//                    the step, checkpoint on every rank whatever train.on_sigint
//                    says, and exit with 75 (ExitCode::kPreempted).
// In a training process all four are blocked in every thread and taken by one
// thread of their own (route_training_signals), which runs these actions: no
// CUDA call is interrupted, and a library's own handler never sees them.
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/train/stop_token.h"

namespace gputrain::app {

// While a command sets up (loads the config and data, builds the model), SIGINT
// and SIGTERM exit with 130 and "stopped by a signal before training started",
// SIGUSR1 with 75 ("preempted ... before training started"). `train` passes
// `checkpoint_requests`: SIGHUP then asks for a checkpoint at the first step
// boundary, as it does while training (its default action ended a run still
// setting up with 129 and nothing said, and a sweep's current run with it).
void install_setup_signal_handlers(bool checkpoint_requests = false);

// The program's first act (app/main.cpp, before LibTorch's initialisers):
// install_setup_signal_handlers, and unblock those signals where the parent
// started gputrain with them blocked (a launcher's thread that blocks them):
// a stop sent before then is acted on now, not held until training starts.
// SIGHUP asks for a checkpoint from here on, as `train` takes it: its default
// action in LibTorch's initialisers (about a second) ended a run with 129 and
// nothing said, and a sweep's current run with it.
void install_first_signal_handlers();

// For every command but `train` and `sweep`: SIGHUP as the process started
// (its default action ends the command, or ignored under nohup), and one that
// came while gputrain loaded takes that action now.
void restore_hangup_action();

// From here on the signals above are taken by a thread of their own. Call it
// after install_setup_signal_handlers and before any other thread starts
// (CUDA's included): each inherits the block.
void route_training_signals();

// After route_training_signals, in a process that turned out to launch workers
// (strategy: auto on several GPUs): the signal thread runs the handlers the
// launcher installs, which pass each signal on to the workers.
void hand_signals_to_launcher();

// Installs the handlers for the rest of the process and returns the token they set.
train::StopToken& install_signal_handlers(config::OnSigint on_sigint);

// The signal that asked the run to stop ("SIGINT", "SIGTERM", "SIGUSR1"), or "" when none did.
std::string stop_signal_name();
// The name of one of those three signals; "" for any other.
std::string signal_name(int signal);

}  // namespace gputrain::app
