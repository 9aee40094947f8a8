#pragma once
// A data set's tensors as NumPy .npy files, so that a Python script can train
// on exactly the samples gputrain generates (scripts/bench/reference.py on the
// synthetic set): <dir>/<split>_inputs.npy and, when labelled,
// <dir>/<split>_targets.npy, with <split> "train" or "test". Image sets also
// as a folder of PNG or JPEG files per class.
#include <filesystem>

#include "gputrain/data/dataset.h"

namespace gputrain::data {

// Writes `tensor` (contiguous, CPU; uint8, int32, int64, float32 or float64) as one .npy file
// (format version 1.0, little-endian, C order). Throws DataError when it
// cannot write.
void write_npy(const std::filesystem::path& file, const torch::Tensor& tensor);

// Checks `--out` before either split is written: refuses (UserError) an empty
// `dir`, one that holds a data set of another kind than the export's (.npy
// arrays, an image folder, IDX, CIFAR-10 or csv files: two sets in one folder),
// and, unless `overwrite`, one that holds an exported split already
// ({train,test}_{inputs,targets}.npy, or with `images` the {train,test} folders).
void check_export_out(const std::filesystem::path& dir, bool images, bool overwrite);

// Creates `dir` if needed and writes the split's inputs and targets, each
// replacing any file of that name.
void export_npy(const Dataset& dataset, const std::filesystem::path& dir, Split split);

enum class ImageFormat { kPng, kJpeg };

// Writes an image split as <dir>/<split>/<class>/<index>.png (or .jpg of
// `jpeg_quality`): the layout `dataset: image_folder` reads, its classes in
// the same order (class_names where they sort as folders, else the indices,
// zero-padded so that they sort as numbers) and each class's images in the
// split's order. The split is written to a temporary folder beside it and
// renamed into place when whole; an existing <dir>/<split> is refused, or
// with `overwrite` replaced.
void export_images(const Dataset& dataset, const std::filesystem::path& dir, Split split, ImageFormat format,
                   int jpeg_quality, bool overwrite);

}  // namespace gputrain::data
