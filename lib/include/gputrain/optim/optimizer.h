#pragma once
// Optimizers from the config: parameter groups, and the step of each optimizer.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gputrain/config/config.h"

namespace gputrain::optim {

// One parameter group of the optimizer: its tensors and how they are updated.
struct ParamGroup {
  std::vector<torch::Tensor> params;
  double weight_decay = 0;
  double lr_multiplier = 1;  // the group's lr is the schedule's × this
  std::string what;          // for the log: "4 tensors of dim <= 1"
  bool muon = false;         // optim.muon's group: Muon's step (optim/muon.h), not optim.name's
  int64_t epochs = 0;        // > 0: trained for the first this many epochs only (lr 0 after)
  int64_t from_epoch = 0;    // > 0: trained from this epoch on (lr 0 before: model.freeze_epochs)
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
// config makes the same groups, which checkpoints rely on. Frozen parameters
// (requires_grad false: model.freeze) are in none. With optim.muon.lr > 0 the
// 4-D tensors (convolution weights) form a last group of their own, Muon's:
// no weight decay, lr × optim.muon.lr / optim.lr.
// `first_epochs_only` (models::first_epochs_only) names parameters that train
// for their first epochs only: each is a group of its own, before Muon's, by
// the same weight decay and lr rules, with ParamGroup::epochs.
// `frozen_first` names parameters that model.freeze holds for its first
// epochs (model.freeze_epochs): they go into groups of their own, after the
// others, by the same rules, with ParamGroup::from_epoch and lr × `later_multiplier`.
struct FrozenFirst {
  std::set<std::string> names;  // the parameters under model.freeze
  int64_t epochs = 0;           // model.freeze_epochs; 0: none
  double later_multiplier = 1;  // model.unfreeze_lr_multiplier
};
std::vector<ParamGroup> param_groups(const config::OptimConfig& config,
                                     const torch::OrderedDict<std::string, torch::Tensor>& named_parameters,
                                     const std::map<std::string, int64_t>& first_epochs_only = {},
                                     const FrozenFirst& frozen_first = {});

// "2 parameter groups: 4 tensors with weight decay 0.0005, lr × 1; 4 biases without weight decay, lr × 64"
std::string describe(const std::vector<ParamGroup>& groups);

// The multipliers of `groups`, in order, as LrSchedule takes them.
std::vector<double> lr_multipliers(const std::vector<ParamGroup>& groups);
// Their ParamGroup::epochs, in order, as LrSchedule takes them.
std::vector<int64_t> trained_epochs(const std::vector<ParamGroup>& groups);
// Their ParamGroup::from_epoch, in order, as LrSchedule takes them.
std::vector<int64_t> starting_epochs(const std::vector<ParamGroup>& groups);

// sgd (lr, momentum, weight_decay, nesterov) | adam | adamw (betas, eps, weight_decay)
// over `groups`, each with its own weight decay and lr × multiplier.
// adamw is torch::optim::AdamW (decoupled decay) with optim.weight_decay as
// given, so its default is the config's 0, not PyTorch's 1e-2. optim.fused
// must be resolved first (resolved_optim in plan/fast_paths.h): auto runs as off here.
// With a Muon group (optim.muon.lr > 0): Muon for it and optim.name for the
// others, in one optimizer (optim/muon.h): SGD's fused kernel whatever
// optim.fused and optim.foreach say; Adam's and AdamW's fused kernel, or their
// foreach step with optim.foreach, even with optim.fused off.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::OptimConfig& config,
                                                        const std::vector<ParamGroup>& groups);

// From now on `optimizer` makes no update while `found` (a float32 scalar on
// its parameters' device) holds 1, read on the device by the fused kernels.
// False, and nothing changed, for an optimizer without a multi-tensor step
// (optim.fused and optim.foreach both off).
bool skip_updates_when(torch::optim::Optimizer& optimizer, const torch::Tensor& found);

}  // namespace gputrain::optim
