#pragma once
// The keys that only the data set can check: the loss and its class weights,
// and the evaluation keys. Each refusal is a ConfigError on its key in the file.
#include <torch/types.h>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"
#include "gputrain/optim/loss.h"

namespace gputrain::plan {

// train.class_weights on `device`, checked against the data set's classes;
// undefined when none are given.
torch::Tensor class_weights(const config::LoadedConfig& loaded, const data::DatasetInfo& info,
                            const torch::Device& device);

// The loss for `info`'s targets (train.loss, train.class_weights on `device`).
optim::LossSpec build_loss(const config::LoadedConfig& loaded, const data::DatasetInfo& info,
                           const torch::Device& device);

// The evaluation keys the data set must suit: train.target_accuracy and an
// accuracy-based train.early_stopping need classes, train.tta images larger
// than its translation.
void check_evaluation_keys(const config::LoadedConfig& loaded, const data::DatasetInfo& info);

// data.decode_threads resolved: as set, or auto (0) the CPUs this process may
// use (device::usable_cpus: its affinity mask and cgroup quota).
int64_t decode_threads(const config::DataConfig& data);

}  // namespace gputrain::plan
