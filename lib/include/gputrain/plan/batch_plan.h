#pragma once
// How a run's samples are batched, worked out in one place so that train,
// bench, plan and the run report agree: the micro-batch is the batch per
// optimizer step / train.accumulation_steps, the epoch's last one short
// unless data.drop_last. The config keeps the batch as written; these are the
// numbers it comes to.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/common/error.h"
#include "gputrain/config/config.h"
#include "gputrain/parallel/strategy.h"

namespace gputrain::plan {

struct BatchPlan {
  int64_t global = 0;        // samples per optimizer step, all processes
  int64_t micro = 0;         // rows per forward pass, before replicas or ranks share them
  int64_t accumulation = 1;  // micro-batches per optimizer step
  int64_t last_micro = 0;    // the epoch's last micro-batch: `micro` when it divides evenly or with drop_last
  int64_t steps_per_epoch = 0;
  int64_t test = 0;      // rows per evaluation batch
  SourceMark stated_at;  // where data.batch_size is written (or defaulted), for errors about the batch

  // What a checkpoint keeps of it.
  checkpoint::ResolvedBatch sizes() const { return {global, accumulation, test}; }
};

// The batch as `loaded` states it for a world of `processes`: data.batch_size,
// or data.micro_batch_size x train.accumulation_steps x processes; the test
// batch data.test_batch_size, else the global batch. nullopt for
// data.batch_size: auto without a micro-batch, which solve_batch measures.
// Throws ConfigError where both are stated and disagree for these processes.
std::optional<checkpoint::ResolvedBatch> stated_batch(const config::LoadedConfig& loaded, int64_t processes);

// The rows of an evaluation batch, one rule for train, test and predict:
// data.test_batch_size; else the batch per optimizer step as stated for
// `processes` (data.batch_size, or data.micro_batch_size x
// train.accumulation_steps x processes); else data.batch_size: auto's
// micro-batch measured to fit (`measured_micro`), or without a measurement
// its target train.target_batch (an evaluation batch holds no gradients or
// activations for backward).
int64_t evaluation_batch(const config::ExperimentConfig& config, int64_t processes,
                         std::optional<int64_t> measured_micro = std::nullopt);

// The batches of `train_samples` in `sizes`, whose accumulation divides the global batch.
BatchPlan plan_batches(const checkpoint::ResolvedBatch& sizes, bool drop_last, int64_t train_samples);

// How the run shares its data: what the run report records about batches and replicas.
struct TrainLayout {
  parallel::StrategyPlan strategy;
  int64_t world_size = 1;
  int64_t train_samples = 0;
  BatchPlan batch;
  bool labeled = true;
  bool classification = true;
  std::vector<std::string> class_names;  // the training set's, where it names its classes
  int64_t skipped_images = 0;            // files both splits left out (data.skip_bad_images)
};

}  // namespace gputrain::plan
