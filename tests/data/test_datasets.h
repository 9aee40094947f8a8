#pragma once
// In-memory data sets for the loader tests: contents chosen by the test, so
// every batch can be checked sample by sample.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <memory>

#include "gputrain/common/error.h"
#include "gputrain/data/tensor_dataset.h"

namespace gputrain::data::testing {

// What make_dataset throws for `config` as a DataError, or "no DataError".
inline std::string make_dataset_error(const config::DataConfig& config, Split split = Split::kTrain) {
  try {
    make_dataset(config, split, 0);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no DataError";
}

// `n` samples whose one feature is their own index. Targets: index % classes
// (kClasses), 2 x index (kValues, one per sample) or none.
inline std::shared_ptr<const TensorDataset> index_dataset(int64_t n, TargetKind kind = TargetKind::kClasses) {
  DatasetInfo info;
  info.name = "index";
  info.source = "memory";
  info.samples = n;
  info.input_shape = {1};
  info.target_kind = kind;
  const torch::Tensor index = torch::arange(n, torch::kInt64);
  const torch::Tensor inputs = index.to(torch::kFloat32).unsqueeze(1).contiguous();
  torch::Tensor targets;
  if (kind == TargetKind::kClasses) {
    info.classes = 10;
    targets = index % 10;
  } else if (kind == TargetKind::kValues) {
    info.targets = 1;
    targets = inputs * 2;
  }
  return std::make_shared<TensorDataset>(info, inputs, targets);
}

// `n` seeded random uint8 images of shape [channels, side, side], labelled index % 10.
inline std::shared_ptr<const TensorDataset> image_dataset(int64_t n, int64_t channels, int64_t side) {
  DatasetInfo info;
  info.name = "images";
  info.source = "memory";
  info.samples = n;
  info.input_shape = {channels, side, side};
  info.classes = 10;
  info.images = true;
  const torch::Tensor pixels =
      torch::randint(0, 256, {n, channels, side, side}, at::detail::createCPUGenerator(1), torch::kUInt8);
  return std::make_shared<TensorDataset>(info, pixels, torch::arange(n, torch::kInt64) % 10);
}

}  // namespace gputrain::data::testing
