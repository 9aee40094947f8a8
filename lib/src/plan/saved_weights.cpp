#include "gputrain/plan/saved_weights.h"

#include <fmt/format.h>

#include "gputrain/common/error.h"
#include "gputrain/plan/data_keys.h"
#include "gputrain/step/amp.h"
#include "problems.h"

namespace gputrain::plan {

namespace {

// data.test_batch_size, else the batch per optimizer step of one process as
// the config states it; for data.batch_size: auto, its target (an evaluation
// batch holds no gradients or activations for backward).
int64_t evaluation_batch(const config::ExperimentConfig& c) {
  if (c.data.test_batch_size > 0) return c.data.test_batch_size;
  if (c.data.batch_size) return *c.data.batch_size;
  if (c.data.micro_batch_size) return *c.data.micro_batch_size * c.train.accumulation_steps;
  return c.train.target_batch;
}

}  // namespace

SavedWeightsPlan resolve_saved_weights(config::LoadedConfig loaded, const device::DeviceInventory& inventory,
                                       WeightsUse use) {
  SavedWeightsPlan plan;
  if (use != WeightsUse::kExport) {
    Problems(nullptr, loaded.sources).attempt([&] {
      plan.devices = device::resolve_devices(loaded.config.device, loaded.config.gpus, inventory);
    });
  }
  const config::ExperimentConfig& c = loaded.config;
  const bool testing = use == WeightsUse::kTest;
  plan.data = testing ? data::make_dataset(c.data, data::Split::kTest, c.seed)
                      : data::make_dataset(data::for_description(c.data), data::Split::kTrain, c.seed);
  const data::DatasetInfo& info = plan.data->info();
  if (use != WeightsUse::kExport && info.target_kind == data::TargetKind::kNone) {
    throw UserError(testing
                        ? fmt::format("data set '{}' has no labels, so there is nothing to test", info.name)
                        : fmt::format("data set '{}' has no labels: its model predicts nothing to report", info.name));
  }
  if (testing) {
    check_evaluation_keys(loaded, info);
    step::check_amp_device(c.train.amp, plan.devices.primary().type(), loaded.sources.at("train.amp"));
  }
  plan.batches = data::loader_options(c.data, data::Split::kTest, evaluation_batch(c), c.seed);
  plan.batches.decode_threads = decode_threads(c.data);
  plan.loaded = std::move(loaded);
  return plan;
}

}  // namespace gputrain::plan
