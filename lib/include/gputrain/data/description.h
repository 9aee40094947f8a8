#pragma once
// What a trained model knows of the data it was trained on. A run's
// checkpoints and model.pt carry it, so that predict, test (on other data) and
// export build the model and name its outputs without the training data (a
// model copied to another machine, a data folder moved or deleted).
#include <string>
#include <string_view>

#include "gputrain/data/dataset.h"

namespace gputrain::data {

// The facts of `info` that shape a model and name its outputs, as JSON: the
// data set's name, the sample shape, images or features, the target kind,
// the classes and their names, the regression targets and a table's columns.
std::string model_description(const DatasetInfo& info);

// The DatasetInfo `text` (model_description's) describes, with no samples and
// `where` as its source. Throws CheckpointError naming `where` for text that
// is not such a description.
DatasetInfo read_model_description(std::string_view text, const std::string& where);

// `info` in a few words, for the log: "npy: uint8 images of [1, 4, 4], 3 classes".
std::string description_summary(const DatasetInfo& info);

// Why `info` (data at hand) cannot feed a model trained on `trained` (read
// from its weights): another sample shape or kind, other targets, labels past
// its classes or other class names; "" when it can.
std::string description_mismatch(const DatasetInfo& trained, const DatasetInfo& info);

}  // namespace gputrain::data
