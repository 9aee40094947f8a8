#include "gputrain/plan/batch_plan.h"

#include "gputrain/common/error.h"
#include "gputrain/data/batch_loader.h"

namespace gputrain::plan {

BatchPlan plan_batches(const config::DataConfig& data_config, int64_t accumulation, int64_t train_samples) {
  GPUTRAIN_CHECK(data_config.batch_size && accumulation >= 1 && *data_config.batch_size % accumulation == 0,
                 "data.batch_size must be decided and divided by train.accumulation_steps before batches are planned");
  BatchPlan batch;
  batch.global = *data_config.batch_size;
  batch.accumulation = accumulation;
  batch.micro = batch.global / accumulation;
  const int64_t rest = train_samples % batch.micro;
  batch.last_micro = rest == 0 || data_config.drop_last ? batch.micro : rest;
  data::LoaderOptions micro_batches;
  micro_batches.batch_size = batch.micro;
  micro_batches.drop_last = data_config.drop_last;
  batch.steps_per_epoch = (data::batch_count(micro_batches, train_samples) + accumulation - 1) / accumulation;
  batch.test = data_config.test_batch_size > 0 ? data_config.test_batch_size : batch.global;
  return batch;
}

}  // namespace gputrain::plan
