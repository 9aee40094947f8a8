#pragma once
// The one Dataset implementation: every reader and generator fills its
// tensors once, and batches are gathered straight from them.
#include <string>
#include <utility>
#include <vector>

#include "gputrain/data/dataset.h"

namespace gputrain::data::detail {

class TensorDataset final : public Dataset {
 public:
  // The files the samples were read from, in order, with how many each held;
  // empty for generated sets.
  struct Part {
    std::string file;
    int64_t samples = 0;
  };

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

// DatasetInfo of a labelled image set (CIFAR-10, IDX) of shape `shape` per sample.
DatasetInfo image_info(const std::string& name, const std::string& source, int64_t samples,
                       std::vector<int64_t> shape);

// The readers and generators behind make_dataset.
std::shared_ptr<const Dataset> read_cifar10(const std::string& root, Split split);
std::shared_ptr<const Dataset> read_idx(const std::string& name, const std::string& root, Split split);
std::shared_ptr<const Dataset> make_random(const config::DataConfig& config, Split split, uint64_t seed);
std::shared_ptr<const Dataset> make_synthetic(const config::DataConfig& config, Split split, uint64_t seed);

// Throws a DataError unless `root` is a directory; `hint` says how to get the data.
void require_directory(const std::string& name, const std::string& root, const std::string& hint);

}  // namespace gputrain::data::detail
