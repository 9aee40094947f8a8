#pragma once
// `gputrain test`, `predict` and `export` resolved once, as resolve_run
// resolves a training run: the device, what the model was trained on, the
// test split, how batches are loaded and which views of an image are scored.
#include <memory>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"
#include "gputrain/device/inventory.h"
#include "gputrain/device/resolve.h"

namespace gputrain::plan {

enum class WeightsUse {
  kTest,     // the test split, with labels: loss and accuracy
  kPredict,  // new inputs: the model's classes and sample shape, nothing read from the training split
  kExport,   // the model written out: described as for kPredict, on the CPU whatever the run trained on
};

struct SavedWeightsOptions {
  // The weights file (a checkpoint or a model.pt): when it carries the
  // description of its training data (checkpoint::stored_training_data), that
  // shapes the model and the training data is not read; else (older files, or
  // empty here) the training split is described from data.root as before.
  std::string weights;
  // test and predict average train.tta's views of each image, as the run's
  // evaluations did; false: the image alone (--tta off).
  bool run_views = true;
};

struct SavedWeightsPlan {
  config::LoadedConfig loaded;
  device::DevicePlan devices;
  data::DatasetInfo trained;  // what the model was trained on: its shape, classes and their names
  std::string trained_from;   // where `trained` came from, for the log: the weights file or the data
  std::shared_ptr<const data::Dataset> test_set;  // kTest: the test split, which fits `trained`; else null
  data::LoaderOptions batches;  // evaluation batches: data.test_batch_size, else the stated batch or auto's target
  // The views of an image test and predict average: train.tta, or none with
  // run_views false. Export keeps the run's, which the exported network leaves out.
  config::TtaConfig tta;
};

// UserError for data without labels to test or predict (nothing to test,
// nothing to report); DataError for a test split that does not fit the
// trained model (another sample shape, targets or classes); ConfigError for a
// device, evaluation key or train.amp the run cannot use.
SavedWeightsPlan resolve_saved_weights(config::LoadedConfig loaded, const device::DeviceInventory& inventory,
                                       WeightsUse use, const SavedWeightsOptions& options = {});

}  // namespace gputrain::plan
