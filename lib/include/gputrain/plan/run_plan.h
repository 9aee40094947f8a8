#pragma once
// A training run resolved once, before anything is built: the strategy, the
// data sets, and the batches with data.batch_size: auto solved. train, bench
// and the Trainer build from it, so none of them plans its own.
#include <memory>
#include <optional>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"
#include "gputrain/device/resolve.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/plan/batch_solver.h"

namespace gputrain::plan {

struct RunPlan {
  // The config, its batch stated as data.batch_size (data.micro_batch_size and
  // data.batch_size: auto resolved into it).
  config::LoadedConfig loaded;
  device::DevicePlan devices;
  parallel::LaunchInfo launch;
  parallel::StrategyPlan strategy;
  std::shared_ptr<const data::Dataset> train_set;
  std::shared_ptr<const data::Dataset> test_set;  // null for unlabeled data
  BatchPlan batch;
  std::optional<BatchChoice> batch_choice;  // data.batch_size: auto's choice and why
};

// Resolves `loaded` for a process of `launch` on `devices`: the batch's form
// for the world size, the strategy, the data sets (read once), and
// data.batch_size: auto by measured steps against train.max_memory (logged).
// ConfigError / DataError for what the run cannot use.
RunPlan resolve_run(config::LoadedConfig loaded, const device::DevicePlan& devices, const parallel::LaunchInfo& launch,
                    const std::string& meminfo = "/proc/meminfo");

}  // namespace gputrain::plan
