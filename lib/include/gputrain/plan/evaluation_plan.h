#pragma once
// When a run evaluates its test split, how, and what the results decide, as
// the plan resolved train's evaluation keys.
#include <cstdint>

#include "gputrain/config/config.h"

namespace gputrain::plan {

// train.target_accuracy and train.early_stopping, as the stop rules judge each evaluation by them.
struct StopRulesOptions {
  double target_accuracy = 0;  // 0: no target
  int64_t patience = 0;        // evaluations without improvement; 0: no early stopping
  double min_delta = 0;        // an improvement is by more than this
  bool by_accuracy = true;     // the early-stopping metric: accuracy (higher is better), else the loss (lower)
};

struct EvaluationPlan {
  int64_t every_epochs = 1;   // train.eval_every
  int64_t every_steps = 0;    // train.eval_every_steps; 0: only at epochs' ends
  config::TtaConfig tta;      // the views of each test image whose logits are averaged
  config::EmaConfig ema;      // the weight average evaluated in the weights' place; decay 0: none
  StopRulesOptions stop;      // train.early_stopping's metric resolved for the task
  bool restore_best = false;  // train.early_stopping.restore_best
};

// `train`'s evaluation keys for a run that classifies or not: train.early_stopping's
// metric auto is the accuracy when it classifies, the loss otherwise.
EvaluationPlan plan_evaluation(const config::TrainConfig& train, bool classification);

}  // namespace gputrain::plan
