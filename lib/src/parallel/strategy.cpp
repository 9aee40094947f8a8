#include "gputrain/parallel/strategy.h"

#include <fmt/format.h>

#include "data_parallel.h"
#include "gputrain/common/error.h"

namespace gputrain::parallel {

namespace {

[[noreturn]] void fail(const config::LoadedConfig& loaded, const std::string& key, const std::string& problem) {
  throw ConfigError(loaded.sources.at(key), key, problem);
}

StrategyPlan plan_data_parallel(const config::LoadedConfig& loaded, const device::DevicePlan& devices) {
  const auto& c = loaded.config;
  StrategyPlan plan;
  plan.kind = StrategyKind::kDataParallel;
  switch (devices.kind) {
    case device::DeviceKind::kCuda:
      plan.replicas = devices.devices();
      if (c.dp.replicas != 0 && c.dp.replicas != static_cast<int64_t>(plan.replicas.size())) {
        fail(loaded, "dp.replicas",
             fmt::format("{} replicas asked for but {} GPUs are selected; on CUDA there is one replica per GPU in "
                         "`gpus` (leave dp.replicas at 0)",
                         c.dp.replicas, plan.replicas.size()));
      }
      plan.reason = fmt::format("one replica per selected GPU ({})", plan.replicas.size());
      return plan;
    case device::DeviceKind::kCpu:
      plan.replicas.assign(static_cast<std::size_t>(std::max<int64_t>(1, c.dp.replicas)), torch::Device(torch::kCPU));
      plan.reason = fmt::format("{} replica thread(s) on the CPU (dp.replicas)", plan.replicas.size());
      return plan;
    default:
      fail(loaded, "strategy", "dp runs on CUDA GPUs or CPU threads, not on " + devices.primary().str());
  }
}

}  // namespace

StrategyPlan plan_strategy(const config::LoadedConfig& loaded, const device::DevicePlan& devices,
                           const LaunchInfo& launch) {
  const std::string& requested = loaded.config.strategy;
  const bool launched = launch.world_size > 1;
  const bool several_gpus = devices.kind == device::DeviceKind::kCuda && devices.gpus.size() > 1;
  if (launched && (requested == "single" || requested == "dp")) {
    fail(loaded, "strategy",
         fmt::format("'{}' cannot run as one of {} launched processes (WORLD_SIZE={}); use strategy: ddp or auto",
                     requested, launch.world_size, launch.world_size));
  }
  if (requested == "ddp" || (requested == "auto" && launched)) {
    StrategyPlan plan;
    plan.kind = StrategyKind::kDistributed;
    if (devices.kind == device::DeviceKind::kCuda) {
      if (launch.local_rank >= static_cast<int64_t>(devices.gpus.size())) {
        fail(loaded, "gpus",
             fmt::format("local rank {} has no GPU: {} selected; start at most one process per selected GPU",
                         launch.local_rank, devices.gpus.size()));
      }
      plan.replicas = {devices.devices()[static_cast<std::size_t>(launch.local_rank)]};
    } else {
      plan.replicas = {devices.primary()};
    }
    plan.reason = requested == "ddp" ? fmt::format("strategy: ddp, world size {}", launch.world_size)
                                     : fmt::format("auto: launched with world size {}", launch.world_size);
    return plan;
  }
  if (requested == "dp" || (requested == "auto" && several_gpus)) {
    StrategyPlan plan = plan_data_parallel(loaded, devices);
    if (requested == "auto") plan.reason = "auto: several GPUs in one process, " + plan.reason;
    return plan;
  }
  StrategyPlan plan;
  plan.kind = StrategyKind::kSingle;
  plan.replicas = {devices.primary()};
  plan.reason = several_gpus ? fmt::format("strategy: single uses {} only of the {} selected GPUs",
                                           devices.primary().str(), devices.gpus.size())
                             : fmt::format("{}: one device", requested == "auto" ? "auto" : "strategy: single");
  return plan;
}

std::unique_ptr<Strategy> make_strategy(const StrategyPlan& plan, const config::ExperimentConfig& config,
                                        const LaunchInfo& launch) {
  switch (plan.kind) {
    case StrategyKind::kSingle: return std::make_unique<detail::SingleDeviceStrategy>(plan.replicas.front());
    case StrategyKind::kDataParallel:
      return std::make_unique<detail::DataParallelStrategy>(plan.replicas, config.train.log_replicas);
    case StrategyKind::kDistributed: break;
  }
  (void)launch;
  throw UserError("strategy: ddp is not available yet in this build");
}

}  // namespace gputrain::parallel
