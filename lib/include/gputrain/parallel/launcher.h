#pragma once
// `gputrain train --nproc N`: N worker processes on this machine, started the
// way torchrun starts them, so a worker cannot tell the two launchers apart.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gputrain/device/resolve.h"
#include "gputrain/parallel/strategy.h"

namespace gputrain::parallel {

struct LauncherOptions {
  int64_t nproc = 1;
  std::string executable;                // what every worker runs: this binary
  std::vector<std::string> arguments;    // the workers' argv[1..]
  std::vector<std::string> environment;  // KEY=VALUE the workers inherit; the rank variables are replaced
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;  // 0: a free port
  // Once a worker fails, the others get this long to exit on their own (they
  // find out through their collectives, and a rank that failed first waited
  // ddp.timeout_s and its roll call already), then SIGTERM, then as long again
  // before SIGKILL; a stopped worker gets SIGTERM (and SIGCONT) at once. So a
  // stopped or hung rank ends the job within ddp.timeout_s + 5 s.
  std::chrono::milliseconds grace{1000};
  // The same, after a worker was killed by a signal (SIGKILL, a crash): the
  // others find out only now, each at its collective, and name the dead rank
  // after the roll call's window (2 s, distributed_strategy.h), which 1 s would
  // cut short on a busy machine. Still within 5 s of the death.
  std::chrono::milliseconds grace_after_a_death{3500};
  // As torchrun's --max-restarts: a group whose worker failed on its own (not
  // a signal passed on, not exit code 2) starts again, every worker, up to
  // this many times, with TORCHELASTIC_RESTART_COUNT counting the restarts.
  int64_t max_restarts = 0;
};

// Plans the strategy of every local rank, so a configuration the workers
// cannot run (strategy: single, nccl on the CPU) fails here, once, with the
// ConfigError plan_strategy throws. More workers than selected GPUs is a
// warning: ranks share GPUs by local rank modulo their count. Returns each
// rank's plan.
std::vector<StrategyPlan> check_local_workers(const StrategyKeys& keys, const device::DevicePlan& devices,
                                              int64_t nproc);

// Starts the workers with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RESTART_COUNT set, forwards
// SIGINT, SIGTERM, SIGHUP and SIGUSR1 to every one, and waits for all of them;
// logs which rank failed first, and restarts the group (max_restarts).
// Returns the launcher's exit code: 0; the first failed worker's exit code
// (75 after a preemption notice); 130 for a worker ended by a forwarded
// signal; 1 for one killed otherwise.
// Throws DistributedError when a worker cannot be started.
int run_local_workers(const LauncherOptions& options);

}  // namespace gputrain::parallel
