#pragma once
// The scalars of a run's metrics (the fields metrics_record.h declares one
// for): what TensorBoard and MLflow are given, under the same names
// (train_step/loss, train/accuracy, test/loss, gpu/cuda0_util, ...).
#include <vector>

#include "gputrain/report/event_file.h"
#include "gputrain/train/observer.h"

namespace gputrain::report::detail {

// A log interval's scalars; `labeled`: the losses mean something, `fp16`: so does the loss scale.
std::vector<report::Scalar> step_scalars(const train::StepMetrics& m, bool labeled, bool fp16);
// An epoch's: train/, test/ and, on CUDA, gpu/.
std::vector<report::Scalar> epoch_scalars(const train::EpochMetrics& m, bool labeled, bool fp16);

}  // namespace gputrain::report::detail
