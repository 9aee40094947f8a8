#pragma once
// `gputrain train --resume auto|PATH`: which checkpoint, and which config.
#include <optional>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/config/config.h"

namespace gputrain::checkpoint {

// Keys that a resumed run may not change, as config/schema.h declares them
// (fixed_on_resume): the model, the data set's identity and shape, the seed
// (data order, generated data) and the optimizer's kind; mid-epoch also what
// fixes the order of micro-batches (the position counts them).
std::vector<std::string> incompatible_keys(const config::ExperimentConfig& stored,
                                           const config::ExperimentConfig& requested, const Position& at);

struct Resumption {
  config::LoadedConfig config;           // what the run uses
  std::optional<Checkpoint> checkpoint;  // nullopt: auto found none, start fresh
};

// `resume` is "auto" or a checkpoint path. The run's config is the
// checkpoint's with `overrides` (--set) applied on top. `file_config` (the
// --config file with the same overrides) is required for auto, which looks in
// its run's checkpoint directory, and optional with a path; when given it must
// agree with the checkpoint on incompatible_keys (CheckpointError naming each
// key, both values and where the new one was written), and other keys it
// changes are ignored with a warning.
Resumption resolve_resume(const std::string& resume, const std::optional<config::LoadedConfig>& file_config,
                          const std::vector<std::string>& overrides);

// What says that this process restarts a job that ran before: torchrun's
// TORCHELASTIC_RESTART_COUNT (also set by `train --nproc --max-restarts`) and
// a requeued Slurm job's SLURM_RESTART_COUNT; 0 where unset.
struct Restarts {
  int64_t elastic = 0;
  int64_t slurm = 0;
};

// Where a run without --resume starts, by train.resume (`setting`): `resume`
// is "" (afresh), "auto" (the newest intact checkpoint, as --resume auto) or a
// checkpoint path, and `reason` says why, for the run-start log.
struct ResumeChoice {
  std::string resume;
  std::string reason;
};
ResumeChoice choose_resume(const config::ResumeFrom& setting, const Restarts& restarts);

}  // namespace gputrain::checkpoint
