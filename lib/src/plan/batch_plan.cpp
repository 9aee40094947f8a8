#include "gputrain/plan/batch_plan.h"

#include <fmt/format.h>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/data/batch_loader.h"

namespace gputrain::plan {

std::optional<checkpoint::ResolvedBatch> stated_batch(const config::LoadedConfig& loaded, int64_t processes) {
  const config::DataConfig& data = loaded.config.data;
  const int64_t accumulation = loaded.config.train.accumulation_steps;
  checkpoint::ResolvedBatch sizes;
  sizes.accumulation = accumulation;
  if (data.micro_batch_size) {
    const int64_t per_process = *data.micro_batch_size * accumulation;
    sizes.global = per_process * processes;
    // Both given: the config checked they agree for some number of processes; now it must be these.
    if (data.batch_size && *data.batch_size != sizes.global) {
      throw ConfigError(
          loaded.sources.at("data.batch_size"), "data.batch_size",
          fmt::format("{} disagrees with data.micro_batch_size: {} per forward pass x {} x {} make a "
                      "batch of {} per optimizer step; set only one of the two",
                      *data.batch_size, *data.micro_batch_size, count_of(accumulation, "accumulation step"),
                      count_of(processes, "process"), sizes.global));
    }
  } else if (data.batch_size) {
    sizes.global = *data.batch_size;
  } else {
    return std::nullopt;
  }
  sizes.test = evaluation_batch(loaded.config, processes);
  return sizes;
}

int64_t evaluation_batch(const config::ExperimentConfig& config, int64_t processes,
                         std::optional<int64_t> measured_micro) {
  const config::DataConfig& data = config.data;
  if (data.test_batch_size > 0) return data.test_batch_size;
  if (data.batch_size) return *data.batch_size;
  if (data.micro_batch_size) return *data.micro_batch_size * config.train.accumulation_steps * processes;
  return measured_micro.value_or(config.train.target_batch);
}

BatchPlan plan_batches(const checkpoint::ResolvedBatch& sizes, bool drop_last, int64_t train_samples) {
  GPUTRAIN_CHECK(
      sizes.global >= 1 && sizes.accumulation >= 1 && sizes.test >= 1 && sizes.global % sizes.accumulation == 0,
      "the batch ({} in {} micro-batches, {} per evaluation) must be resolved before it is planned", sizes.global,
      sizes.accumulation, sizes.test);
  BatchPlan batch;
  batch.global = sizes.global;
  batch.accumulation = sizes.accumulation;
  batch.micro = batch.global / batch.accumulation;
  const int64_t rest = train_samples % batch.micro;
  batch.last_micro = rest == 0 || drop_last ? batch.micro : rest;
  data::Batching micro_batches;
  micro_batches.batch_size = batch.micro;
  micro_batches.drop_last = drop_last;
  batch.steps_per_epoch =
      (data::batch_count(micro_batches, train_samples) + batch.accumulation - 1) / batch.accumulation;
  batch.test = sizes.test;
  return batch;
}

}  // namespace gputrain::plan
