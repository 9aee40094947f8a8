#pragma once
// data.batch_size: auto — the largest micro-batch whose training step fits in
// memory, and the fewest accumulation steps that make train.target_batch.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/step_memory.h"

namespace gputrain::plan {

struct BatchChoice {
  int64_t batch_size = 0;    // per optimizer step, all processes: train.target_batch
  int64_t micro_batch = 0;   // per forward pass in each process
  int64_t accumulation = 1;  // micro-batches per optimizer step
  int64_t step_bytes = 0;    // one training step at micro_batch, measured
  int64_t budget = -1;       // bytes a step may take; -1: what the device can allocate
  std::string budget_source;
  std::vector<std::string> refused;  // each larger micro-batch and why it was not taken

  // "micro-batch 512 x 4 accumulation steps = 2048 (train.target_batch); ..."
  std::string describe() const;
};

// The micro-batches per process that make `target` over `processes`:
// target / (a x processes) for every accumulation a that divides evenly,
// largest first; none when `processes` does not divide `target`.
std::vector<int64_t> micro_batch_candidates(int64_t target, int64_t processes);

// What one training step of a micro-batch holds; nullopt when it ran out of memory.
using StepMeasure = std::function<std::optional<StepMemory>(int64_t micro_batch)>;

// Measures the smallest candidate, then tries the candidates from the largest
// down, measuring for real (`measure`) only those whose estimate (the fixed
// bytes plus the activations per sample seen so far) fits `budget`, and takes
// the first that fits. A budget < 0 takes the first that does not run out of
// memory. Throws UserError when even the smallest does not fit.
BatchChoice choose_batch(int64_t target, int64_t processes, int64_t budget, const StepMeasure& measure);

// Solves data.batch_size: auto for a run of `loaded` planned as `strategy`
// under `amp` in a world of `processes`: measures real steps of the model on `train_set`
// against train.max_memory (auto: half the host's available memory read from
// `meminfo`, divided among the processes, on the CPU; on CUDA what the GPU can
// allocate). Nothing when the config states the batch (data.batch_size or
// data.micro_batch_size).
std::optional<BatchChoice> solve_batch(const config::LoadedConfig& loaded, const ModelInitPlan& init,
                                       const std::shared_ptr<const data::Dataset>& train_set,
                                       const parallel::StrategyPlan& strategy, config::AmpMode amp, int64_t processes,
                                       const std::string& meminfo = "/proc/meminfo");

}  // namespace gputrain::plan
