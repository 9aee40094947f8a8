#pragma once
// `gputrain predict`: saved weights applied to the user's own samples.
#include <ostream>
#include <string>

#include "gputrain/data/prediction_inputs.h"
#include "gputrain/plan/run_plan.h"

namespace gputrain::predict {

// Writes one CSV row per sample of `input_path` (data::read_prediction_inputs)
// after a header: `sample,prediction` (the class index), then `class_name`
// where the data set names its classes (DatasetInfo::class_names) and
// `p_<class>` per class (its name, or its index); for regression the predicted
// values (`value` or `value_0`, `value_1`, ...). The inputs pass through the
// test split's loader: the same normalisation as training and testing; and
// images are scored as `gputrain test` scores them, by the mean of the plan's
// test-time views (train.tta, unless --tta off), which it logs.
void write_predictions(const plan::RunPlan& plan, const std::string& weights_path, const std::string& input_path,
                       std::ostream& out);

// What predict scores: the model's outputs for every sample of `inputs` (read
// by data::read_prediction_inputs), logits or regression values, [samples,
// outputs] float32 on the CPU in the samples' order.
torch::Tensor predict_outputs(const plan::RunPlan& plan, const std::string& weights_path,
                              const data::PredictionInputs& inputs);

}  // namespace gputrain::predict
