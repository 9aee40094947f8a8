#pragma once
// A data set's tensors as NumPy .npy files, so that a Python script can train
// on exactly the samples gputrain generates (scripts/bench/reference.py on the
// synthetic set): <dir>/<split>_inputs.npy and, when labelled,
// <dir>/<split>_targets.npy, with <split> "train" or "test".
#include <filesystem>

#include "gputrain/data/dataset.h"

namespace gputrain::data {

// Writes `tensor` (contiguous, CPU; uint8, int32, int64, float32 or float64) as one .npy file
// (format version 1.0, little-endian, C order). Throws DataError when it
// cannot write.
void write_npy(const std::filesystem::path& file, const torch::Tensor& tensor);

// Creates `dir` if needed and writes the split's inputs and targets.
void export_npy(const Dataset& dataset, const std::filesystem::path& dir, Split split);

}  // namespace gputrain::data
