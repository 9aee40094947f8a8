// gputrain whose every checkpoint (and export) write pauses for a minute half-way, so that
// a test can kill it, or signal it again, in the middle of one (it logs
// "test hook: pausing" when the pause begins).
#include "commands.h"

int main(int argc, char** argv) {
  gputrain::WriteHooks pause;
  pause.pause_mid_write_s = 60;
  return gputrain::app::run_cli(argc, argv, pause);
}
