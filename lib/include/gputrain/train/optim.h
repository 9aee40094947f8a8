#pragma once
// Optimizers, learning-rate schedules and losses from the config.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <memory>
#include <string>

#include "gputrain/config/config.h"

namespace gputrain::train {

// sgd (lr, momentum, weight_decay, nesterov) | adam | adamw (betas, eps, weight_decay).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::OptimConfig& config,
                                                        std::vector<torch::Tensor> parameters);

// The learning rate at optimizer step `step` (0-based) of `total_steps`, per
// optim.scheduler (none | step | cosine | onecycle) after optim.warmup_steps of
// linear warm-up. `steps_per_epoch` turns optim.step_size (epochs) into steps.
class LrSchedule {
 public:
  LrSchedule(const config::OptimConfig& config, int64_t steps_per_epoch, int64_t total_steps);
  double lr_at(int64_t step) const;
  // Sets every parameter group of `optimizer` to lr_at(step).
  void apply(torch::optim::Optimizer& optimizer, int64_t step) const;

 private:
  config::OptimConfig config_;
  int64_t steps_per_epoch_;
  int64_t total_steps_;
};

enum class LossKind { kCrossEntropy, kMse };

// train.loss; "auto" means cross_entropy for class labels, mse for values.
LossKind resolve_loss(const std::string& name, bool class_targets);

// Sum of the per-sample losses (callers divide), so accumulation and replicas
// can weight by their real share of the batch.
torch::Tensor loss_sum(LossKind kind, const torch::Tensor& outputs, const torch::Tensor& targets);

}  // namespace gputrain::train
