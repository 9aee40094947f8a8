#pragma once
// model.sync_batchnorm: batchnorm whose batch statistics are those of the
// global batch under ddp. Each process computes its rows' count, mean and
// sum of squared deviations per channel, two all-reduces combine those across
// processes (Chan et al.'s parallel variance), and the backward pass
// all-reduces the gradient of the global moments, so every rank normalises
// with (and learns from) the statistics one process on the whole batch would
// see. Without a summing
// function (one process, evaluation) it is torch's batchnorm. Its parameters
// and buffers are named as BatchNorm's: checkpoints move between the two.
#include <torch/nn/cloneable.h>

#include "gputrain/models/factory.h"

namespace gputrain::models::detail {

struct SyncBatchNormOptions {
  int64_t features = 0;
  double momentum = 0.1;
  double eps = 1e-5;
  bool images = false;  // [N, C, H, W] inputs (batchnorm 2d), else [N, C]
};

class SyncBatchNormImpl : public torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  explicit SyncBatchNormImpl(SyncBatchNormOptions options);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  // Sums a tensor across the processes in place; empty: statistics stay local.
  void share_statistics(SumAcrossProcesses sum) { sum_ = std::move(sum); }
  const SyncBatchNormOptions& options() const { return options_; }

  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  torch::Tensor synchronised(const torch::Tensor& input);

  SyncBatchNormOptions options_;
  SumAcrossProcesses sum_;
};
TORCH_MODULE(SyncBatchNorm);

}  // namespace gputrain::models::detail
