#pragma once
// The samples `gputrain predict` scores, read from a file of the config's
// kind and checked against the training split's sample shape.
#include <memory>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"

namespace gputrain::data {

struct PredictionInputs {
  // Shaped and typed as the training split, so the test loader normalises it
  // the same way; its targets are placeholders.
  std::shared_ptr<const Dataset> dataset;
  std::vector<std::string> names;  // per sample, for the output's first column: file or index
};

// `path`: an image file (.png, .jpg, .jpeg) or a folder of them (searched
// through its subfolders; each named by its path in it), decoded to the
// training images' channels and size (resized under data.image_size); a .npy
// of inputs ([N, ...] as the training inputs; uint8 for images); or a .csv
// with the columns of data.root's train.csv (the target's may be left out).
// A DataError (exit 2) names the file and what does not match.
PredictionInputs read_prediction_inputs(const std::string& path, const config::DataConfig& config,
                                        const DatasetInfo& train);

}  // namespace gputrain::data
