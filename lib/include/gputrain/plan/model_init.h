#pragma once
// model.init_from and model.freeze resolved before anything trains: which of
// the file's tensors fit the model (by name and shape) and which do not, and
// which parameters are frozen. The builder applies it
// (checkpoint::load_named_weights, models::freeze); `gputrain plan` and the
// run's log show it.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include "gputrain/config/config.h"

namespace gputrain::plan {

struct ModelInitPlan {
  std::string file;                  // model.init_from; "" = the layers' own initialisation
  std::string weights;               // which weights of the file, for the user
  std::vector<std::string> renamed;  // "old -> new": by model.init_map, or by position (checkpoint::rename_by_position)
  bool renamed_by_position = false;
  std::vector<std::pair<std::string, torch::Tensor>> loaded;  // the file's tensors that fit, by model name (CPU)
  std::vector<std::string> skipped;  // each tensor that does not fit, and why ("fc.weight: [5, 128] in the file, ...")
  int64_t loaded_values = 0;
  int64_t skipped_values = 0;       // the model's values that keep their initialisation
  std::vector<std::string> freeze;  // model.freeze's prefixes, each matching at least one parameter
  std::set<std::string> frozen;     // the parameters under them, by name
  int64_t freeze_epochs = 0;        // model.freeze_epochs: > 0, frozen for these first epochs only
  double unfreeze_lr_multiplier = 1;
  int64_t frozen_tensors = 0;
  int64_t frozen_values = 0;
  int64_t trainable_values = 0;
  config::FrozenBatchnorm frozen_batchnorm = config::FrozenBatchnorm::kEval;

  // What will be loaded, skipped and frozen, with counts; empty when nothing is.
  std::vector<std::string> describe() const;
};

// Reads model.init_from's names and shapes and matches them against `model`
// (model.* built on the CPU), and model.freeze's prefixes against its
// parameter names. ConfigError (exit 2), at the key, naming the
// file, the tensors and the fix: under model.init_strict a tensor that does not
// fit; a file of which no tensor fits (another model's, or not weights); a
// freeze prefix that matches nothing (listing the model's top-level names); a
// freeze that leaves nothing to train; a file that cannot be read (its
// CheckpointError's message); a tensor that fits but holds NaN or infinity.
// A state dict whose every name starts with "module." (saved from PyTorch's
// DistributedDataParallel or DataParallel) is read without it, as logged.
// model.init_map's rules rename the file's names first (a rule that renames
// nothing, or is not `from=to`, is a ConfigError); without rules, names that
// are not the model's but line up with it one for one are read by position.
ModelInitPlan resolve_model_init(const config::LoadedConfig& loaded, const torch::nn::Module& model);

}  // namespace gputrain::plan
