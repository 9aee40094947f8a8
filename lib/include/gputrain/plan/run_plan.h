#pragma once
// A training run resolved once, before anything is built: the devices, the
// processes, the strategy, the data sets, and the batches with
// data.batch_size: auto solved. train, bench, `gputrain plan` and the Trainer
// all read it, so none of them resolves its own.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"
#include "gputrain/device/inventory.h"
#include "gputrain/device/resolve.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/plan/batch_solver.h"

namespace gputrain::plan {

// What a command knows before it resolves a run.
struct RunRequest {
  device::DeviceInventory inventory;      // the GPUs this process can see
  parallel::LaunchInfo launch;            // what a launcher (torchrun, srun) told this process
  std::optional<int64_t> nproc;           // train --nproc N: start N local workers
  bool one_process = false;               // bench: this process runs the step, however many GPUs there are
  std::string meminfo = "/proc/meminfo";  // where the host's free memory is read (tests name another)
};

struct RunPlan {
  // The config, its batch stated as data.batch_size (data.micro_batch_size and
  // data.batch_size: auto resolved into it).
  config::LoadedConfig loaded;
  device::DevicePlan devices;
  parallel::ProcessPlan processes;  // workers > 0: this process starts them, and the rest is rank 0's plan
  parallel::LaunchInfo launch;      // this process's, or under workers rank 0's
  parallel::StrategyPlan strategy;
  std::vector<parallel::StrategyPlan> worker_strategies;  // each local worker's, rank order, when workers > 0
  std::shared_ptr<const data::Dataset> train_set;
  std::shared_ptr<const data::Dataset> test_set;  // null for unlabeled data
  BatchPlan batch;
  std::optional<BatchChoice> batch_choice;  // data.batch_size: auto's choice and why
};

// Resolves `loaded` for `request`: the devices, the processes (and, when this
// process starts local workers, each worker's strategy), the batch's form for
// the world size, the strategy, train.amp on the device, the data sets (read
// once), and data.batch_size: auto by measured steps against train.max_memory
// (logged). When this process only starts workers, the data sets are read only
// if data.batch_size: auto needs them; each worker resolves its own run.
// Throws the first ConfigError / DataError / UserError.
RunPlan resolve_run(config::LoadedConfig loaded, const RunRequest& request);

// The same on devices already chosen (tests, or a DevicePlan built by hand).
RunPlan resolve_run(config::LoadedConfig loaded, const device::DevicePlan& devices, const parallel::LaunchInfo& launch,
                    const std::string& meminfo = "/proc/meminfo");

// How far a resolution that collects its problems got.
enum class Reached {
  kDevices,   // devices and processes; the strategy falls back to single on the primary device
  kStrategy,  // the strategy; the data sets could not be read
  kData,      // the data sets; the batch could not be decided
  kComplete,
};

// `gputrain plan`'s resolution: every problem train would stop at, each
// "where: what. How to fix", instead of the first. A refused part falls back
// (devices to the CPU, the strategy to single, train.amp to off) so the parts
// after it are still resolved; those that need a missing part are not.
struct CollectedRun {
  RunPlan plan;  // resolved up to `reached`, defaults after it
  Reached reached = Reached::kDevices;
  std::vector<std::string> problems;
};
CollectedRun collect_run(config::LoadedConfig loaded, const RunRequest& request);

}  // namespace gputrain::plan
