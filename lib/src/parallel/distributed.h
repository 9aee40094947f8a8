#pragma once
// ddp: one process per device, on LibTorch's c10d (a TCPStore for the
// rendezvous, Gloo or NCCL for the collectives). Only distributed.cpp and the
// backends' files see c10d.
#include <memory>

#include "gputrain/parallel/strategy.h"

namespace gputrain::parallel::detail {

// Joins the process group (rank 0 hosts the store); throws DistributedError
// when the rendezvous fails or does not complete within ddp.timeout_s.
std::unique_ptr<Strategy> make_distributed_strategy(const StrategyPlan& plan, const LaunchInfo& launch);

}  // namespace gputrain::parallel::detail
