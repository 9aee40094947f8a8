// run_child under a SignalRelay: the stop signals passed on to the child, and
// the exit code a child ends with when one kills it.
#include "gputrain/common/process.h"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <tuple>

namespace gputrain {
namespace {

// Issue 62 #14: a child that a passed-on stop signal kills before it has a
// handler (gputrain's first ~30 ms, while its libraries load; a shell without
// a trap here) ends as a run that handled it: 75 for a preemption notice, so
// that `gputrain sweep` records it as preempted, 130 for the others. The child
// sends the signal to its parent, the relay passes it back.
TEST(SignalRelay, AChildAStopSignalKillsBeforeItsHandlersEndsAsARunItStopped) {
  for (const auto& [signal, name, code] : {std::tuple{SIGUSR1, "USR1", 75}, std::tuple{SIGTERM, "TERM", 130}}) {
    const SignalRelay relay;
    const ChildOutput child = run_child({"/bin/sh", "-c", std::string("kill -") + name + " $PPID; exec sleep 30"});
    EXPECT_EQ(child.exit_code, code) << name;
    EXPECT_EQ(relay.stop_signal(), signal) << name;
  }
  // A signal the relay did not pass on keeps 128 + its number.
  EXPECT_EQ(run_child({"/bin/sh", "-c", "kill -KILL $$"}).exit_code, 128 + SIGKILL);
}

// A SIGHUP passed on (write a checkpoint and carry on) reached the child
// before it had a handler (a sweep's run while gputrain loads), and its
// default action ended the run with 129. The child starts with it ignored, as
// a shell without a trap shows; `train` installs its own.
TEST(SignalRelay, AHangupPassedOnBeforeTheChildsHandlerLeavesItRunning) {
  const SignalRelay relay;
  const ChildOutput child = run_child({"/bin/sh", "-c", "kill -HUP $PPID; sleep 1; echo carried on"});
  EXPECT_EQ(child.exit_code, 0);
  EXPECT_EQ(child.out, "carried on\n");
  EXPECT_EQ(relay.stop_signal(), 0);  // not a stop signal
}

}  // namespace
}  // namespace gputrain
