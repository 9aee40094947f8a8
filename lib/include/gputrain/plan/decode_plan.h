#pragma once
// data.decode decided for a split: where the JPEG files image_folder reads per
// batch (data.cache: none) are decoded, by nvJPEG on the training GPU or by the
// loader's host threads.
#include <torch/types.h>

#include <functional>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"

namespace gputrain::plan {

// data.decode for `dataset` on `device`; `nvjpeg_missing` says why nvJPEG
// cannot run in this process (data::nvjpeg_missing(); empty when it can),
// asked only when nothing else rules the GPU out (it loads the library). auto
// picks gpu only on CUDA, for image_folder files read per batch, all JPEGs,
// with nvJPEG loaded; else cpu, saying why. gpu where it cannot run is a
// ConfigError at data.decode's line saying why and how to fix it.
data::DecodeChoice decide_decode(const config::LoadedConfig& loaded, const data::Dataset& dataset,
                                 const torch::Device& device, const std::function<std::string()>& nvjpeg_missing);

}  // namespace gputrain::plan
