#pragma once
// Shared by the data-set fuzz targets: the input becomes files in a scratch
// directory, and loading them must give a consistent data set or a DataError.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "gputrain/config/config.h"

namespace gputrain::fuzz {

void write_file(const std::filesystem::path& file, const uint8_t* data, std::size_t size);

// Loads the test split of `dataset` from `root`. A DataError is fine; any
// other exception escapes (libFuzzer reports it), and a data set whose tensors
// disagree with its DatasetInfo aborts.
void load_or_data_error(config::DatasetName dataset, const std::filesystem::path& root);

}  // namespace gputrain::fuzz
