#pragma once
// `gputrain predict`: saved weights applied to the user's own samples.
#include <ostream>
#include <string>

#include "gputrain/config/load.h"
#include "gputrain/device/resolve.h"

namespace gputrain::train {

// Writes one CSV row per sample of `input_path` (data::read_prediction_inputs)
// after a header: `sample,prediction` and, for classification, `p_<class>` per
// class (the class's label, or its index); for regression the predicted
// values (`value` or `value_0`, `value_1`, ...). The inputs pass through the
// test split's loader: the same normalisation as training and testing.
void predict(const config::LoadedConfig& loaded, const device::DevicePlan& devices, const std::string& weights_path,
             const std::string& input_path, std::ostream& out);

}  // namespace gputrain::train
