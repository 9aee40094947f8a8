#pragma once
// In-memory data sets for the loader tests: contents chosen by the test, so
// every batch can be checked sample by sample.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <memory>
#include <utility>

#include "gputrain/data/dataset.h"

namespace gputrain::data::testing {

class MemoryDataset : public Dataset {
 public:
  MemoryDataset(DatasetInfo info, torch::Tensor inputs, torch::Tensor targets)
      : info_(std::move(info)), inputs_(std::move(inputs)), targets_(std::move(targets)) {}
  const DatasetInfo& info() const override { return info_; }
  const torch::Tensor& inputs() const override { return inputs_; }
  const torch::Tensor& targets() const override { return targets_; }
  DatasetInfo& mutable_info() { return info_; }
  torch::Tensor& mutable_targets() { return targets_; }

 private:
  DatasetInfo info_;
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

// `n` samples whose one feature is their own index, labelled index % classes.
inline std::shared_ptr<MemoryDataset> index_dataset(int64_t n, int64_t classes = 10) {
  DatasetInfo info;
  info.name = "index";
  info.source = "memory";
  info.samples = n;
  info.input_shape = {1};
  info.classes = classes;
  torch::Tensor index = torch::arange(n, torch::kInt64);
  return std::make_shared<MemoryDataset>(info, index.to(torch::kFloat32).unsqueeze(1).contiguous(),
                                         (index % classes).contiguous());
}

// `n` uint8 images of shape [channels, side, side] with pixel values from a
// seeded generator, labelled index % 10.
inline std::shared_ptr<MemoryDataset> image_dataset(int64_t n, int64_t channels, int64_t side, uint64_t seed = 1) {
  DatasetInfo info;
  info.name = "images";
  info.source = "memory";
  info.samples = n;
  info.input_shape = {channels, side, side};
  info.classes = 10;
  info.images = true;
  torch::Tensor pixels = torch::randint(0, 256, {n, channels, side, side},
                                        at::detail::createCPUGenerator(seed), torch::kUInt8);
  return std::make_shared<MemoryDataset>(info, pixels, (torch::arange(n, torch::kInt64) % 10).contiguous());
}

}  // namespace gputrain::data::testing
