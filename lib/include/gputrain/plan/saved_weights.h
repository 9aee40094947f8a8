#pragma once
// `gputrain test`, `predict` and `export` resolved once, as resolve_run
// resolves a training run: the device, the data set whose facts shape the
// model, and how its batches are loaded.
#include <memory>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"
#include "gputrain/device/inventory.h"
#include "gputrain/device/resolve.h"

namespace gputrain::plan {

enum class WeightsUse {
  kTest,     // the test split, with labels: loss and accuracy
  kPredict,  // new inputs: the training split described (not read) for its shape and classes
  kExport,   // the model written out: described as for kPredict, on the CPU whatever the run trained on
};

struct SavedWeightsPlan {
  config::LoadedConfig loaded;
  device::DevicePlan devices;
  std::shared_ptr<const data::Dataset> data;
  data::LoaderOptions batches;  // evaluation batches: data.test_batch_size, else the stated batch or auto's target
};

// UserError for data without labels to test or predict (nothing to test,
// nothing to report); ConfigError for a device, evaluation key or train.amp
// the run cannot use.
SavedWeightsPlan resolve_saved_weights(config::LoadedConfig loaded, const device::DeviceInventory& inventory,
                                       WeightsUse use);

}  // namespace gputrain::plan
