#pragma once
// A training run resolved once, before anything is built: the devices, the
// processes, the strategy, the data sets, their loaders and device caches, the loss and the
// evaluation keys checked against the data, the batches with
// data.batch_size: auto solved, the model's facts, how each step runs
// (train.amp on the device and every fast path decided, with its reason) and
// how the run evaluates.
// train, bench, `gputrain plan` and the Trainer all read it, so none of them
// resolves its own. Nothing resolved is written into the config.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"
#include "gputrain/device/inventory.h"
#include "gputrain/device/kernel_caches.h"
#include "gputrain/device/resolve.h"
#include "gputrain/optim/loss.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/plan/batch_solver.h"
#include "gputrain/plan/evaluation_plan.h"
#include "gputrain/plan/fast_paths.h"
#include "gputrain/plan/model_init.h"
#include "gputrain/plan/outputs.h"
#include "gputrain/plan/step_memory.h"

namespace gputrain::plan {

// What a command resolves a run for.
enum class Purpose {
  kTrain,     // train and `gputrain plan`: every part of the run
  kBench,     // bench: the training run's step in this one process, however many GPUs there are
  kEvaluate,  // test: saved weights on the test split, with labels: loss and accuracy
  kPredict,   // predict: saved weights on new inputs: the model's classes and sample shape
  kExport,    // export: the network written out, on the CPU whatever the run trained on
  kDescribe,  // model and config: the configured network for its data's samples, on the CPU
};

// Whether `purpose` uses weights trained before (test, predict, export) or
// describes the model (model, config): no training run is resolved, only the
// device, what the model was trained on and how it is evaluated.
bool uses_saved_model(Purpose purpose);

// What a command knows before it resolves a run (plan/start.h makes it).
struct RunRequest {
  Purpose purpose = Purpose::kTrain;
  device::DeviceInventory inventory;      // the GPUs this process can see
  parallel::LaunchInfo launch;            // what a launcher (torchrun, srun) told this process
  std::optional<int64_t> nproc;           // train --nproc N: start N local workers
  std::string meminfo = "/proc/meminfo";  // where the host's free memory is read (tests name another)
  // A batch resolved before, which data.batch_size: auto takes instead of
  // measuring: a resumed run's checkpoint's (absent in older checkpoints), or
  // the one `train --nproc`'s launcher measured for its workers.
  std::optional<checkpoint::ResolvedBatch> resolved_batch;
  std::string resolved_by;         // who resolved it, for the log: "the checkpoint", "the launcher"
  bool resuming = false;           // a checkpoint is continued: its run directory holds the run
  bool resumed_mid_epoch = false;  // the checkpoint stopped inside an epoch: the batch may not change
  // Where LibTorch and CUDA keep the kernels they compile: on CUDA the run
  // logs it (train, bench). Absent (gputrain plan, tests): nothing is said.
  std::optional<device::KernelCacheEnv> kernel_cache_env;
  // test, predict, export: the weights file (a checkpoint or a model.pt). When
  // it carries the description of its training data
  // (checkpoint::stored_training_data), that shapes the model and the
  // training data is not read; else (older files, or empty) the training
  // split is described from data.root.
  std::string weights;
  // test and predict average train.tta's views of each image, as the run's
  // evaluations did; false (--tta off): the image alone. Export keeps the
  // run's, which the exported network leaves out.
  bool run_views = true;
};

// How each optimizer step runs.
struct StepPlan {
  // train.amp as the run uses it: checked on the device (collecting, off where refused).
  config::AmpMode amp = config::AmpMode::kOff;
  double grad_clip = 0;  // train.grad_clip; 0: none
  config::OnNan on_nan = config::OnNan::kStop;
  bool zero_grad_in_place = false;  // ddp.gradient_as_bucket_view, under ddp
  // Each fast path decided for the plan's micro-batch on the strategy's first
  // device, with the reason the log and `gputrain plan` give.
  FastPaths fast;
};

// How train's loop runs its epochs, and what its checkpoints keep.
struct LoopPlan {
  int64_t epochs = 0;                                          // train.epochs
  int64_t log_every = 50;                                      // train.log_every: steps between progress lines
  config::OnSigint on_sigint = config::OnSigint::kCheckpoint;  // train.on_sigint
  config::ProfileConfig profile;                               // train.profile: the epoch whose steps are traced
  config::CheckpointConfig checkpoint;                         // checkpoint.*: when they are written, how many kept
  // The config as written (config::dump_config), which every checkpoint keeps: resuming runs it.
  std::string config_text;
};

struct RunPlan {
  // The config as written, with its defaults. Only plan/ reads it: every
  // command reads the pieces below, which the plan took from it or resolved.
  config::LoadedConfig loaded;
  std::string name;             // name: the run's, in its logs, report and exports
  uint64_t seed = 0;            // seed: the model's initial weights
  config::ModelConfig network;  // model.*: what models::make_model builds for `trained`'s samples
  // data.* as written: how predict reads new inputs, and the normalisation model.whiten works in.
  config::DataConfig data;
  LoopPlan loop;
  device::DevicePlan devices;
  // What the model is shaped for: the training split's description, or for
  // saved weights the one their file carries; `trained_from` says which, for the log.
  data::DatasetInfo trained;
  std::string trained_from;
  parallel::ProcessPlan processes;  // workers > 0: this process starts them, and the rest is rank 0's plan
  parallel::LaunchInfo launch;      // this process's, or under workers rank 0's
  parallel::StrategyPlan strategy;
  std::vector<parallel::StrategyPlan> worker_strategies;  // each local worker's, rank order, when workers > 0
  std::shared_ptr<const data::Dataset> train_set;
  std::shared_ptr<const data::Dataset> test_set;  // null for unlabeled data (and for predict, export, describe)
  // For labeled data: train.loss, with train.class_weights on the first replica's device.
  optim::LossSpec loss;
  BatchPlan batch;
  std::optional<BatchChoice> batch_choice;  // data.batch_size: auto's measured choice and why
  // The splits' loaders in the plan's batches (training in micro-batches), before a strategy shards them;
  // for saved weights, test_loader is how test and predict batch their samples (evaluation_batch).
  data::LoaderOptions train_loader;
  data::LoaderOptions test_loader;
  // data.device_cache for each split on the strategy's first device, with the
  // memory free when the plan was made (rank 0's when this process only starts workers: undecided).
  data::DeviceCacheChoices device_cache;
  // data.decode for each split on the strategy's first device (plan/decode_plan.h).
  data::DecodeChoices decode;
  ModelFacts model;          // the model's, traced once on the CPU
  ModelInitPlan model_init;  // model.init_from's tensors that fit, and model.freeze's parameters
  StepPlan step;
  config::OptimConfig optim;  // optim with fused and foreach as the fast paths decided
  EvaluationPlan evaluation;
  // train: where the run writes, checked by rank 0 before anything is built (plan/outputs.h).
  OutputPlan outputs;
};

// The config as config.yaml records it: as written, but with data.batch_size:
// auto's measured batch as numbers, so that `train --config` repeats the run
// without measuring.
config::ExperimentConfig config_with_resolved_batch(const RunPlan& run);

// Resolves `loaded` for `request`: the devices, the processes (and, when this
// process starts local workers, each worker's strategy), the batch's form for
// the world size, the strategy, train.amp on the device, the data sets (read
// once), and data.batch_size: auto by measured steps against train.max_memory
// (logged), or as the resumed checkpoint resolved it. When this process only starts workers, the data sets are read
// only if data.batch_size: auto needs them; each worker resolves its own run. Throws the first ConfigError / DataError
// / UserError.
// For saved weights (uses_saved_model): the device (the CPU for export and
// describe), `trained`, the test split (test: it must fit `trained`, a
// DataError otherwise), the loss, the evaluation keys, train.amp and the
// evaluation batches; a UserError for data without labels to test or predict.
RunPlan resolve_run(config::LoadedConfig loaded, const RunRequest& request);

// The same on devices already chosen (tests, or a DevicePlan built by hand).
RunPlan resolve_run(config::LoadedConfig loaded, const device::DevicePlan& devices, const parallel::LaunchInfo& launch,
                    const std::string& meminfo = "/proc/meminfo");

// How far a resolution that collects its problems got.
enum class Reached {
  kDevices,   // devices and processes; the strategy falls back to single on the primary device
  kStrategy,  // the strategy; the data sets could not be read
  kData,      // the data sets; the batch could not be decided
  kBatch,     // the batch; the model could not be built, or not trained in these batches
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
  // What `gputrain plan` measures beyond train's resolution: one step's memory
  // on each device (when complete), and the training data's bytes on disk (0: generated).
  std::optional<MemoryPlan> memory;
  int64_t data_bytes_on_disk = 0;
};
CollectedRun collect_run(config::LoadedConfig loaded, const RunRequest& request);

}  // namespace gputrain::plan
