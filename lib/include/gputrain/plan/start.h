#pragma once
// Every command's start, made in one place: the config it runs (--config's,
// or a checkpoint's under --resume or train.resume), the devices this process
// sees, what a launcher told it, and its run resolved for the command's
// purpose. app/ reads argv and the environment into a StartRequest; nothing
// else assembles a RunRequest, so `gputrain plan` plans what `train` runs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/resume.h"
#include "gputrain/device/inventory.h"
#include "gputrain/device/kernel_caches.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/run_plan.h"

namespace gputrain::plan {

// What a command read from its command line and its environment.
struct StartRequest {
  Purpose purpose = Purpose::kTrain;
  std::string command = "train";          // the command, for messages
  std::vector<std::string> config_files;  // --config, each time given (later over earlier); empty when not
  std::vector<std::string> overrides;     // --set in order (train's --output among them, as output.dir)
  // train and plan: --resume, "auto" or a checkpoint file; "" (train.resume decides). config: the same.
  std::string resume;
  std::string weights;            // test, predict, export: --checkpoint (a checkpoint file or a model.pt)
  bool run_views = true;          // test, predict: --tta run (train.tta's views); false: --tta off
  parallel::LaunchInfo launch;    // what a launcher (torchrun, srun, --nproc's parent) said
  checkpoint::Restarts restarts;  // train.resume: auto reads them
  std::optional<int64_t> nproc;   // train --nproc N, plan --nproc N
  std::optional<std::string> cuda_visible_devices;
  // The batch the parent of `train --nproc` resolved for its workers (GPUTRAIN_RESOLVED_BATCH).
  std::optional<checkpoint::ResolvedBatch> launcher_batch;
  std::optional<device::KernelCacheEnv> kernel_cache_env;  // logged on CUDA by train and bench
  std::string meminfo = "/proc/meminfo";                   // where the host's free memory is read (tests name another)
};

// The config a command runs, and the checkpoint a training run continues:
// --config's with --set; with --resume (train, plan, config) the checkpoint's
// with --set on top; for train and plan without --resume, as train.resume
// says (restarts); for test, predict and export the config --config gives, or
// the one the --checkpoint file holds. `problems` (plan): the config file's
// own problems are listed there and it falls back (config::load_config).
checkpoint::Resumption starting_point(const StartRequest& request, std::vector<ConfigError>* problems = nullptr);

// Whether `run` can continue from `checkpoint`'s position: within
// train.epochs, with a step per epoch done, inside an epoch of the run's
// micro-batches. CheckpointError naming the file otherwise.
void check_resumable(const checkpoint::Checkpoint& checkpoint, const RunPlan& run);

// A command's start: its run resolved strictly (the first problem throws).
struct Start {
  std::optional<checkpoint::Checkpoint> checkpoint;  // the one a training run continues
  device::DeviceInventory inventory;                 // the GPUs this process sees
  RunPlan run;
};
Start start_run(const StartRequest& request);

// `gputrain plan`'s start: the same resolution collecting every problem
// (config problems first, then each part's at its place) instead of the first.
struct CollectedStart {
  bool configured = false;  // a config was read (from the file, or the checkpoint's); else `run` is empty
  std::string config_from;  // the file(s) it was read from: --config ("a.yaml + b.yaml"), or the checkpoint
  device::DeviceInventory inventory;
  CollectedRun run;
};
CollectedStart collect_start(const StartRequest& request);

}  // namespace gputrain::plan
