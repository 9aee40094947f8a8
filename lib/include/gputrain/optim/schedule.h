#pragma once
// The learning-rate schedule from the config.
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <vector>

#include "gputrain/config/config.h"

namespace gputrain::optim {

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
// A parameter group's lr is lr_at(s) × its ParamGroup::lr_multiplier, and 0
// from the first step of epoch ParamGroup::epochs on when that is > 0, and
// before the first step of epoch ParamGroup::from_epoch when that is > 0 (lr 0
// leaves the parameter as it is in SGD, Adam and AdamW, momentum and decay
// included; the step reads the lr from the device, so a CUDA graph does too).
class LrSchedule {
 public:
  // `lr_multipliers`: one per parameter group of the optimizers apply() sets
  // (lr_multipliers(groups)); empty: every group at lr_at(step).
  // `trained_epochs`: trained_epochs(groups), or empty: every group throughout.
  // `starting_epochs`: starting_epochs(groups), or empty: every group from the start.
  LrSchedule(const config::OptimConfig& config, int64_t steps_per_epoch, int64_t total_steps,
             std::vector<double> lr_multipliers = {}, std::vector<int64_t> trained_epochs = {},
             std::vector<int64_t> starting_epochs = {});
  double lr_at(int64_t step) const;
  // Sets parameter group g of `optimizer` to lr_at(step) × its multiplier.
  void apply(torch::optim::Optimizer& optimizer, int64_t step) const;

 private:
  double scheduled(int64_t step) const;  // f(s), before the warm-up factor

  config::OptimConfig config_;
  int64_t steps_per_epoch_;
  int64_t total_steps_;
  std::vector<double> lr_multipliers_;
  std::vector<int64_t> trained_epochs_;
  std::vector<int64_t> starting_epochs_;
};

}  // namespace gputrain::optim
