#pragma once
// How a run's samples are batched, worked out in one place so that train,
// bench, plan and the run report agree: the micro-batch is data.batch_size /
// train.accumulation_steps, the epoch's last one short unless data.drop_last.
#include <cstdint>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/parallel/strategy.h"

namespace gputrain::plan {

struct BatchPlan {
  int64_t global = 0;        // samples per optimizer step, all processes: data.batch_size
  int64_t micro = 0;         // rows per forward pass, before replicas or ranks share them
  int64_t accumulation = 1;  // micro-batches per optimizer step
  int64_t last_micro = 0;    // the epoch's last micro-batch: `micro` when it divides evenly or with drop_last
  int64_t steps_per_epoch = 0;
  int64_t test = 0;  // rows per evaluation batch: data.test_batch_size, else data.batch_size
};

// The batches of `train_samples` under `data_config` (data.batch_size decided: a
// number, or auto once solved) and `accumulation` steps, which the config
// checked divide it.
BatchPlan plan_batches(const config::DataConfig& data_config, int64_t accumulation, int64_t train_samples);

// How the run shares its data: what the run report records about batches and replicas.
struct TrainLayout {
  parallel::StrategyPlan strategy;
  int64_t world_size = 1;
  int64_t train_samples = 0;
  BatchPlan batch;
  bool labeled = true;
  bool classification = true;
  std::vector<std::string> class_names;  // the training set's, where it names its classes
};

}  // namespace gputrain::plan
