// strategy: auto on made-up machines: how many processes train starts, and
// what each one then runs. Issue 36: several GPUs meant dp, which turns the
// CUDA graph off and sums gradients one parameter at a time on one thread.
#include <gtest/gtest.h>

#include "gputrain/device/resolve.h"
#include "gputrain/parallel/launcher.h"
#include "gputrain/parallel/strategy.h"
#include "support/machine.h"

namespace gputrain::parallel {
namespace {

using gputrain::testing::machine;

struct Decision {
  ProcessPlan processes;
  std::vector<StrategyPlan> ranks;  // what each started worker runs; this process's plan when none
};

// The keys of a run that says only `gpus:` and `strategy:` (each left at
// all and auto by default), on a machine with `gpus` GPUs.
struct Run {
  config::GpuSelection selection;
  StrategyKeys keys;
};

Run selecting(std::vector<int64_t> gpus) {
  Run run;
  run.selection = {false, std::move(gpus)};
  return run;
}

Run with_strategy(config::StrategyName strategy) {
  Run run;
  run.keys.strategy = strategy;
  return run;
}

Decision decide(int gpus, const Run& run = {}, LaunchInfo launch = {}, std::optional<int64_t> nproc = std::nullopt) {
  const device::DevicePlan devices = device::resolve_devices({}, run.selection, machine(gpus));
  Decision d{plan_processes(run.keys.strategy, devices, launch, nproc), {}};
  d.ranks = d.processes.workers > 0 ? check_local_workers(run.keys, devices, d.processes.workers)
                                    : std::vector<StrategyPlan>{plan_strategy(run.keys, devices, launch)};
  return d;
}

TEST(ProcessPlan, AutoOnOneGpuOrTheCpuTrainsInThisProcess) {
  for (int gpus : {0, 1}) {
    const Decision d = decide(gpus);
    EXPECT_EQ(d.processes.workers, 0) << gpus;
    EXPECT_EQ(d.processes.reason, "one process (strategy: auto)");
    EXPECT_EQ(d.ranks.front().kind, StrategyKind::kSingle);
    EXPECT_EQ(d.ranks.front().replicas.front(), gpus == 0 ? torch::Device("cpu") : torch::Device("cuda:0"));
  }
}

TEST(ProcessPlan, AutoOnSeveralGpusStartsOneNcclWorkerPerGpuNeverDp) {
  for (int gpus : {2, 8}) {
    const Decision d = decide(gpus);
    EXPECT_EQ(d.processes.workers, gpus);
    EXPECT_NE(d.processes.reason.find(
                  fmt::format("auto: {} GPUs selected, so {} ddp workers, one per GPU over NCCL", gpus, gpus)),
              std::string::npos)
        << d.processes.reason;
    ASSERT_EQ(d.ranks.size(), static_cast<std::size_t>(gpus));
    for (int rank = 0; rank < gpus; ++rank) {
      const StrategyPlan& plan = d.ranks[static_cast<std::size_t>(rank)];
      EXPECT_EQ(plan.kind, StrategyKind::kDistributed);
      EXPECT_EQ(plan.backend, config::DdpBackend::kNccl);
      EXPECT_EQ(plan.replicas, std::vector<torch::Device>{torch::Device(torch::kCUDA, rank)});
    }
  }
}

// A process that has several GPUs and is not a worker (bench, a test) trains on one, not with dp.
TEST(ProcessPlan, AutoInOneProcessOfSeveralGpusIsSingleNotDp) {
  const StrategyPlan plan = plan_strategy({}, device::resolve_devices({}, {}, machine(8)), {});
  EXPECT_EQ(plan.kind, StrategyKind::kSingle);
  EXPECT_EQ(plan.reason, "auto: one process uses cuda:0 only of the 8 selected GPUs");
}

TEST(ProcessPlan, DpAndSingleStayInOneProcessWhenAskedFor) {
  const Decision dp = decide(8, with_strategy(config::StrategyName::kDp));
  EXPECT_EQ(dp.processes.workers, 0);
  EXPECT_EQ(dp.ranks.front().kind, StrategyKind::kDataParallel);
  EXPECT_EQ(dp.ranks.front().replicas.size(), 8u);
  const Decision single = decide(2, with_strategy(config::StrategyName::kSingle));
  EXPECT_EQ(single.processes.workers, 0);
  EXPECT_EQ(single.ranks.front().kind, StrategyKind::kSingle);
  EXPECT_EQ(decide(2, selecting({1})).processes.workers, 0);  // one GPU selected
  EXPECT_EQ(decide(8, selecting({2, 5})).ranks.back().replicas.front(), torch::Device("cuda:5"));
}

TEST(ProcessPlan, ALauncherOrNprocDecidesInstead) {
  LaunchInfo rank;
  rank.world_size = 8;
  rank.rank = rank.local_rank = 3;
  const Decision launched = decide(8, {}, rank);
  EXPECT_EQ(launched.processes.workers, 0);
  EXPECT_EQ(launched.processes.reason, "rank 3 of 8 started by a launcher");
  EXPECT_EQ(launched.ranks.front().kind, StrategyKind::kDistributed);
  EXPECT_EQ(launched.ranks.front().replicas.front(), torch::Device("cuda:3"));

  const Decision asked = decide(8, {}, {}, 2);
  EXPECT_EQ(asked.processes.workers, 2);
  EXPECT_EQ(asked.processes.reason, "2 local workers (train --nproc 2)");
  EXPECT_EQ(decide(0, {}, {}, 2).ranks.front().backend, config::DdpBackend::kGloo);
}

}  // namespace
}  // namespace gputrain::parallel
