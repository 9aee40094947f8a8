#pragma once
// Optimizers, learning-rate schedules and losses from the config.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gputrain/config/config.h"

namespace gputrain::train {

// One parameter group of the optimizer: its tensors and how they are updated.
struct ParamGroup {
  std::vector<torch::Tensor> params;
  double weight_decay = 0;
  double lr_multiplier = 1;  // the group's lr is the schedule's × this
  std::string what;          // for the log: "4 tensors of dim <= 1"
};

// The model's parameters in groups, in at most four, in this order (empty ones left out):
//   tensors             weight decay optim.weight_decay, lr × 1
//   tensors of dim <= 1 no weight decay,                  lr × 1
//   biases              weight decay optim.weight_decay, lr × optim.bias_lr_multiplier
//   biases              no weight decay,                  lr × optim.bias_lr_multiplier
// A parameter gets no weight decay when optim.no_decay_bias_norm is on and it
// has at most one dimension: biases, and the weights and biases of BatchNorm,
// LayerNorm and GroupNorm (timm's and nanoGPT's rule). It is a bias
// when optim.bias_lr_multiplier is not 1 and its name ends in "bias" (a
// normalisation layer's weight is not). With both keys at their defaults
// there is one group, as before them. Each keeps the model's order, so the same
// config makes the same groups, which checkpoints rely on.
std::vector<ParamGroup> param_groups(const config::OptimConfig& config,
                                     const torch::OrderedDict<std::string, torch::Tensor>& named_parameters);

// "2 parameter groups: 4 tensors with weight decay 0.0005, lr × 1; 4 biases without weight decay, lr × 64"
std::string describe(const std::vector<ParamGroup>& groups);

// The multipliers of `groups`, in order, as LrSchedule takes them.
std::vector<double> lr_multipliers(const std::vector<ParamGroup>& groups);

// sgd (lr, momentum, weight_decay, nesterov) | adam | adamw (betas, eps, weight_decay)
// over `groups`, each with its own weight decay and lr × multiplier.
// adamw is torch::optim::AdamW (decoupled decay) with optim.weight_decay as
// given, so its default is the config's 0, not PyTorch's 1e-2. optim.fused
// must be resolved first (resolved_optim in builder.h): auto runs as off here.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::OptimConfig& config,
                                                        const std::vector<ParamGroup>& groups);

// From now on `optimizer` makes no update while `found` (a float32 scalar on
// its parameters' device) holds 1, read on the device by the fused kernels.
// False, and nothing changed, for an optimizer without a multi-tensor step
// (optim.fused and optim.foreach both off).
bool skip_updates_when(torch::optim::Optimizer& optimizer, const torch::Tensor& found);

// The learning rate at optimizer step `step` (0-based) of `total_steps`, per
// optim.scheduler (none | step | cosine | onecycle | linear_warmup_decay)
// after optim.warmup_steps of linear warm-up. `steps_per_epoch` turns
// optim.step_size (epochs) into steps.
//
// With lr = optim.lr, T = total_steps, W = warmup_steps, E = steps_per_epoch:
//   lr_at(s)  = warm(s) * f(s),  warm(s) = (s + 1) / W for s < W, else 1
// The warm-up scales the schedule (PyTorch's LinearLR(start_factor=1/W,
// total_iters=W-1) chained with it), so the schedule keeps its own clock: step
// decays still fall on epoch boundaries and cosine still reaches 0 at T. The
// first step's lr is never 0.
//   none:     f(s) = lr
//   step:     f(s) = lr * gamma^floor(s / (step_size * E))          (StepLR)
//   cosine:   f(s) = lr * (1 + cos(pi * min(s, T) / T)) / 2          (CosineAnnealingLR, eta_min 0)
//   onecycle: PyTorch's OneCycleLR with its defaults (pct_start 0.3,
//             div_factor 25, final_div_factor 1e4, cosine annealing):
//             with a = lr / 25, z = a / 1e4 = lr / 2.5e5, P = 0.3 * T - 1,
//             anneal(x, y, t) = y + (x - y) * (1 + cos(pi * t)) / 2,
//               s <= P: f(s) = anneal(a, lr, s / P)
//               s >  P: f(s) = anneal(lr, z, min(1, (s - P) / (T - 1 - P)))
//             so f(0) = lr / 25, f(P) = lr where P is whole, f(T - 1) = z.
//   linear_warmup_decay: with a = optim.warmup_fraction, c = optim.cooldown_fraction
//             (a + c <= 1), a trapezoid, the speed records' schedule:
//             f(s) = lr * max(0, min(1, (s + 1) / (a * T), (T - s) / (c * T)))
//             leaving out the term of a fraction that is 0. It rises from
//             lr / (a * T) at the first step to lr at s = a * T - 1, holds, and
//             from s = T - c * T falls by lr / (c * T) a step to lr / (c * T) at
//             the last step, reaching 0 at T, when the run has ended (as
//             cosine does; airbench and modded-nanogpt count alike): no step
//             runs at lr 0. a + c = 1 makes a triangle, a = c = 0 a constant lr.
//             optim.warmup_steps is refused with it (config/schema.h): the two
//             warm-ups would multiply.
// A parameter group's lr is lr_at(s) × its ParamGroup::lr_multiplier.
class LrSchedule {
 public:
  // `lr_multipliers`: one per parameter group of the optimizers apply() sets
  // (lr_multipliers(groups)); empty: every group at lr_at(step).
  LrSchedule(const config::OptimConfig& config, int64_t steps_per_epoch, int64_t total_steps,
             std::vector<double> lr_multipliers = {});
  double lr_at(int64_t step) const;
  // Sets parameter group g of `optimizer` to lr_at(step) × its multiplier.
  void apply(torch::optim::Optimizer& optimizer, int64_t step) const;

 private:
  double scheduled(int64_t step) const;  // f(s), before the warm-up factor

  config::OptimConfig config_;
  int64_t steps_per_epoch_;
  int64_t total_steps_;
  std::vector<double> lr_multipliers_;
};

enum class LossKind { kCrossEntropy, kMse };

// train.loss; "auto" means cross_entropy for class labels, mse for values.
// cross_entropy on real-valued targets, or mse on class labels, is a
// ConfigError on train.loss.
LossKind resolve_loss(config::LossName name, bool class_targets);

// What a run's loss is computed from.
struct LossSpec {
  LossKind kind = LossKind::kCrossEntropy;
  int64_t classes = 0;          // classification: the classes; 0 otherwise
  torch::Tensor class_weights;  // train.class_weights on the device; undefined when none
  double label_smoothing = 0;   // train.label_smoothing (cross_entropy only)
};

// Sum of the per-sample losses (callers divide), so accumulation and replicas
// can weight by their real share of the batch.
//   cross_entropy: sum over samples of -log softmax(outputs)[target]
//                  (cross_entropy with reduction sum; int64 class targets [N]).
//   mse:           sum over samples of the mean squared error over that
//                  sample's values, i.e. mse_loss(reduction none).flatten(1).mean(1).sum();
//                  outputs and targets must both be [N, values...]. Divided by
//                  N it equals PyTorch's MSELoss (reduction mean) for any
//                  number of values per sample, since each sample has as many.
// With `class_weights` (cross_entropy only, one per class) each sample's loss
// is weighted by its class's weight, and the sum scaled by N / (the sum of the
// batch's weights): divided by N it is PyTorch's CrossEntropyLoss(weight=...)
// with its weighted mean. With `label_smoothing` ε each sample's target is
// 1 - ε on its class plus ε / C on every class, as CrossEntropyLoss(label_smoothing=ε).
torch::Tensor loss_sum(const LossSpec& loss, const torch::Tensor& outputs, const torch::Tensor& targets);

// How many rows' largest output is their target class, as
// outputs.argmax(1).eq(targets).sum(): a 0-dim int64 tensor on the outputs'
// device, never synced; undefined for regression.
torch::Tensor correct_count(const torch::Tensor& outputs, const torch::Tensor& targets, bool classification);

// Backpropagates a loss summed over samples as their mean: backward() from
// the sum with 1/samples as its incoming gradient. Dividing the sum first
// gives the same gradients bit for bit but costs a division, its autograd
// node and a ones_like per micro-batch, which small models feel.
class MeanBackward {
 public:
  void operator()(const torch::Tensor& loss_sum, int64_t samples);

 private:
  std::map<int64_t, torch::Tensor> weights_;  // 1/samples by samples: a full batch and the epoch's last
};

}  // namespace gputrain::train
