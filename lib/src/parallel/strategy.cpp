#include "gputrain/parallel/strategy.h"

#include <fmt/format.h>

#include <cmath>

#include "data_parallel.h"
#include "distributed.h"
#include "gputrain/common/error.h"
#include "gputrain/common/process.h"

namespace gputrain::parallel {

namespace {

// The run's plan places the error at the key's line.
[[noreturn]] void fail(const std::string& key, const std::string& problem) { throw ConfigError({}, key, problem); }

StrategyPlan plan_data_parallel(const config::DpConfig& dp, const device::DevicePlan& devices) {
  StrategyPlan plan;
  plan.kind = StrategyKind::kDataParallel;
  switch (devices.kind) {
    case device::DeviceKind::kCuda:
      plan.replicas = devices.devices();
      if (dp.replicas != 0 && dp.replicas != static_cast<int64_t>(plan.replicas.size())) {
        fail("dp.replicas",
             fmt::format("{} replicas asked for but {} GPUs are selected; on CUDA there is one replica per GPU in "
                         "`gpus` (leave dp.replicas at 0)",
                         dp.replicas, plan.replicas.size()));
      }
      plan.reason = fmt::format("one replica per selected GPU ({})", plan.replicas.size());
      return plan;
    case device::DeviceKind::kCpu:
      plan.replicas.assign(static_cast<std::size_t>(std::max<int64_t>(1, dp.replicas)), torch::Device(torch::kCPU));
      plan.reason = fmt::format("{} replica thread(s) on the CPU (dp.replicas)", plan.replicas.size());
      return plan;
    default:
      fail("strategy", "dp runs on CUDA GPUs or CPU threads, not on " + devices.primary().str());
  }
}

// auto: NCCL between GPUs, Gloo between CPU processes.
config::DdpBackend ddp_backend(config::DdpBackend requested, const device::DevicePlan& devices) {
  const bool cuda = devices.kind == device::DeviceKind::kCuda;
  if (!cuda && devices.kind != device::DeviceKind::kCpu) {
    fail("strategy", "ddp runs on CUDA GPUs or on the CPU, not on " + devices.primary().str());
  }
  if (requested == config::DdpBackend::kNccl && !cuda) {
    fail("ddp.backend",
         "nccl runs between CUDA GPUs only, but this run is on the CPU; use ddp.backend: gloo (or auto)");
  }
  if (requested == config::DdpBackend::kAuto) return cuda ? config::DdpBackend::kNccl : config::DdpBackend::kGloo;
  return requested;
}

}  // namespace

void check_launch(const LaunchInfo& launch) {
  if (launch.world_size < 1) {
    throw UserError(fmt::format("WORLD_SIZE={}: the number of processes must be at least 1", launch.world_size));
  }
  if (launch.rank < 0 || launch.rank >= launch.world_size) {
    throw UserError(
        fmt::format("RANK={} with WORLD_SIZE={}: ranks run from 0 to WORLD_SIZE-1; check the launcher's "
                    "settings",
                    launch.rank, launch.world_size));
  }
  if (launch.local_rank < 0 || launch.local_rank >= launch.world_size) {
    throw UserError(fmt::format("LOCAL_RANK={} with WORLD_SIZE={}: a local rank runs from 0 to WORLD_SIZE-1",
                                launch.local_rank, launch.world_size));
  }
  if (launch.master_port < 1 || launch.master_port > 65535) {
    throw UserError(fmt::format("MASTER_PORT={}: a TCP port runs from 1 to 65535", launch.master_port));
  }
  if (launch.master_addr.empty()) throw UserError("MASTER_ADDR is empty: give the host name or address of rank 0");
}

namespace {

// The kind of strategy, its devices and why.
StrategyPlan choose_strategy(const StrategyKeys& keys, const device::DevicePlan& devices, const LaunchInfo& launch) {
  using config::StrategyName;
  const StrategyName requested = keys.strategy;
  const bool launched = launch.world_size > 1;
  const bool several_gpus = devices.kind == device::DeviceKind::kCuda && devices.gpus.size() > 1;
  if (launched && (requested == StrategyName::kSingle || requested == StrategyName::kDp)) {
    fail("strategy",
         fmt::format("'{}' cannot run as one of {} launched processes (WORLD_SIZE={}); use strategy: ddp or auto",
                     config::word(requested), launch.world_size, launch.world_size));
  }
  if (requested == StrategyName::kDdp || (requested == StrategyName::kAuto && launched)) {
    StrategyPlan plan;
    plan.kind = StrategyKind::kDistributed;
    plan.backend = ddp_backend(keys.ddp.backend, devices);
    std::string binding;
    if (devices.kind == device::DeviceKind::kCuda) {
      const std::vector<torch::Device> gpus = devices.devices();
      const auto count = static_cast<int64_t>(gpus.size());
      const int64_t pick = launch.local_rank % count;
      plan.replicas = {gpus[static_cast<std::size_t>(pick)]};
      if (count == 1 && launch.local_rank > 0) {
        binding = fmt::format(
            "; local rank {} uses {}, the one GPU it sees (a launcher that binds one GPU per task, "
            "as Slurm's --gpus-per-task=1)",
            launch.local_rank, plan.replicas.front().str());
      } else if (launch.local_rank >= count) {
        binding = fmt::format("; local rank {} uses {} (local rank modulo the {} selected GPUs)", launch.local_rank,
                              plan.replicas.front().str(), count);
      }
    } else {
      plan.replicas = {devices.primary()};
    }
    plan.reason =
        (requested == StrategyName::kDdp ? fmt::format("strategy: ddp, world size {}", launch.world_size)
                                         : fmt::format("auto: launched with world size {}", launch.world_size)) +
        binding;
    return plan;
  }
  if (requested == StrategyName::kDp) return plan_data_parallel(keys.dp, devices);
  StrategyPlan plan;
  plan.kind = StrategyKind::kSingle;
  plan.replicas = {devices.primary()};
  const char* said = requested == StrategyName::kAuto ? "auto" : "strategy: single";
  plan.reason = several_gpus ? fmt::format("{}: one process uses {} only of the {} selected GPUs", said,
                                           devices.primary().str(), devices.gpus.size())
                             : fmt::format("{}: one device", said);
  return plan;
}

}  // namespace

ProcessPlan plan_processes(config::StrategyName requested, const device::DevicePlan& devices, const LaunchInfo& launch,
                           std::optional<int64_t> nproc) {
  using config::StrategyName;
  if (nproc && launch.world_size > 1) {
    throw UserError(
        fmt::format("--nproc starts workers of its own, but this process is already rank {} of {} "
                    "(launched by torchrun or srun); leave --nproc out",
                    launch.rank, launch.world_size));
  }
  if (nproc) return {*nproc, fmt::format("{} local workers (train --nproc {})", *nproc, *nproc)};
  if (launch.world_size > 1) {
    return {0, fmt::format("rank {} of {} started by a launcher", launch.rank, launch.world_size)};
  }
  const auto gpus = static_cast<int64_t>(devices.gpus.size());
  const bool several_gpus = devices.kind == device::DeviceKind::kCuda && gpus > 1;
  if (several_gpus && (requested == StrategyName::kAuto || requested == StrategyName::kDdp)) {
    return {gpus, fmt::format("{}: {} GPUs selected, so {} ddp workers, one per GPU over NCCL, as train --nproc {} "
                              "(strategy: dp keeps one process, without the CUDA graph)",
                              config::word(requested), gpus, gpus, gpus)};
  }
  return {0, fmt::format("one process (strategy: {})", config::word(requested))};
}

StrategyPlan plan_strategy(const StrategyKeys& keys, const device::DevicePlan& devices, const LaunchInfo& launch) {
  StrategyPlan plan = choose_strategy(keys, devices, launch);
  plan.log_replicas = keys.log_replicas;
  plan.timeout_s = keys.ddp.timeout_s;
  plan.bucket_cap_mb = keys.ddp.bucket_cap_mb;
  plan.gradient_as_bucket_view = keys.ddp.gradient_as_bucket_view;
  return plan;
}

std::vector<std::string> Strategy::rank_hosts() const { return {host_name()}; }

StepFlags Strategy::agree(StepFlags local, const torch::Tensor& step_loss) {
  if (step_loss.defined() && !std::isfinite(step_loss.item<double>())) local.non_finite = true;
  return local;
}

std::unique_ptr<Strategy> make_strategy(const StrategyPlan& plan, const LaunchInfo& launch) {
  switch (plan.kind) {
    case StrategyKind::kSingle:
      return std::make_unique<detail::SingleDeviceStrategy>(plan.replicas.front());
    case StrategyKind::kDataParallel:
      return std::make_unique<detail::DataParallelStrategy>(plan.replicas, plan.log_replicas);
    case StrategyKind::kDistributed:
      return detail::make_distributed_strategy(plan, launch);
  }
  GPUTRAIN_CHECK(false, "unknown strategy kind {}", static_cast<int>(plan.kind));
}

}  // namespace gputrain::parallel
