#include "gputrain/plan/saved_weights.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/data/description.h"
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
                                       WeightsUse use, const SavedWeightsOptions& options) {
  SavedWeightsPlan plan;
  if (use != WeightsUse::kExport) {
    Problems(nullptr, loaded.sources).attempt([&] {
      plan.devices = device::resolve_devices(loaded.config.device, loaded.config.gpus, inventory);
    });
  }
  const config::ExperimentConfig& c = loaded.config;
  const bool testing = use == WeightsUse::kTest;
  const std::string stored = options.weights.empty() ? "" : checkpoint::stored_training_data(options.weights);
  if (!stored.empty()) {
    plan.trained = data::read_model_description(stored, options.weights);
    plan.trained_from = fmt::format("as {} describes it", options.weights);
  } else {  // weights written before they carried it: the training split, described (not decoded)
    plan.trained = data::make_dataset(data::for_description(c.data), data::Split::kTrain, c.seed)->info();
    plan.trained_from = fmt::format("from the data set ({})", plan.trained.source);
  }
  spdlog::info("the model's training data: {}, {}", data::description_summary(plan.trained), plan.trained_from);
  if (use != WeightsUse::kExport && plan.trained.target_kind == data::TargetKind::kNone) {
    throw UserError(
        testing ? fmt::format("data set '{}' has no labels, so there is nothing to test", plan.trained.name)
                : fmt::format("data set '{}' has no labels: its model predicts nothing to report", plan.trained.name));
  }
  if (testing) {
    plan.test_set = data::make_dataset(c.data, data::Split::kTest, c.seed, stored.empty() ? nullptr : &plan.trained);
    const data::DatasetInfo& info = plan.test_set->info();
    if (const std::string mismatch = data::description_mismatch(plan.trained, info); !mismatch.empty()) {
      throw DataError(fmt::format("the test split {} {} ({}); test the model on data like its training data",
                                  info.source, mismatch, plan.trained_from));
    }
    check_evaluation_keys(loaded, info);
    step::check_amp_device(c.train.amp, plan.devices.primary().type(), loaded.sources.at("train.amp"));
  } else if (use == WeightsUse::kPredict) {
    check_evaluation_keys(loaded, plan.trained);  // train.tta's views must fit the model's images
  }
  plan.batches = data::loader_options(c.data, data::Split::kTest, evaluation_batch(c), c.seed);
  plan.batches.decode_threads = decode_threads(c.data);
  plan.tta = options.run_views || use == WeightsUse::kExport ? c.train.tta : config::TtaConfig{};
  plan.loaded = std::move(loaded);
  return plan;
}

}  // namespace gputrain::plan
