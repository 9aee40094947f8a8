#pragma once
// A Dataset over tensors already in memory. Every reader and generator builds
// one; callers and tests can wrap their own tensors in it too.
#include <string>
#include <utility>
#include <vector>

#include "gputrain/data/dataset.h"

namespace gputrain::data {

class TensorDataset final : public Dataset {
 public:
  // The files the samples were read from, in order, with how many each held;
  // empty for generated sets.
  struct Part {
    std::string file;
    int64_t samples = 0;
  };

  // `inputs`: contiguous uint8 [N, C, H, W] images or float32 [N, F]
  // features; `targets` as info.target_kind says (undefined for kNone).
  TensorDataset(DatasetInfo info, torch::Tensor inputs, torch::Tensor targets, std::vector<Part> parts = {})
      : info_(std::move(info)), inputs_(std::move(inputs)), targets_(std::move(targets)), parts_(std::move(parts)) {}

  const DatasetInfo& info() const override { return info_; }
  const torch::Tensor& inputs() const override { return inputs_; }
  const torch::Tensor& targets() const override { return targets_; }
  std::string describe_sample(int64_t index) const override;

 private:
  DatasetInfo info_;
  torch::Tensor inputs_;
  torch::Tensor targets_;
  std::vector<Part> parts_;
};

}  // namespace gputrain::data
