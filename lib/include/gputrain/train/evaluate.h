#pragma once
// Evaluation passes: the test split after each epoch, and `gputrain test` on saved weights.
#include <torch/nn/modules/container/sequential.h>

#include <string>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/device/resolve.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/train/amp.h"
#include "gputrain/train/evaluation.h"
#include "gputrain/train/optim.h"

namespace gputrain::train {

// One pass over `batches` in eval mode under no-grad; leaves the model in
// eval mode. Classification also counts the confusion matrix, on the device.
EvalResult evaluate(torch::nn::Sequential& model, data::BatchLoader& batches, parallel::Strategy& strategy,
                    const LossSpec& loss, AmpMode amp);

// `gputrain test`: builds the test split and the model, loads `weights_path`
// (a model.pt or a checkpoint) into it and evaluates. Throws CheckpointError for weights that do not fit.
EvalResult evaluate_saved_weights(const config::LoadedConfig& loaded, const device::DevicePlan& devices,
                                  const std::string& weights_path);

}  // namespace gputrain::train
