#pragma once
// The trainer's state by concern, each piece saving itself into a checkpoint
// and restoring itself from one: where the run stands, the training sums, and
// what its evaluations found.
#include <torch/nn/module.h>

#include <optional>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/step/optimizer_step.h"
#include "gputrain/step/running_sums.h"
#include "gputrain/train/stop_rules.h"
#include "gputrain/train/trainer.h"

namespace gputrain::train::detail {

// Where the run stands.
struct RunPosition {
  int64_t step = 0;         // optimizer steps since the run began
  int64_t epochs_done = 0;  // complete epochs
  int64_t batch = 0;        // micro-batches of the current epoch consumed
  std::optional<checkpoint::Position> resumed_from;
  std::string resumed_path;  // the checkpoint resumed from; "" when none

  void save(checkpoint::TrainingState& state) const;
  void restore(const checkpoint::TrainingState& state, const std::string& checkpoint_name);
};

// The training loss and accuracy summed since the last log line and over the
// epoch, and the steps train.on_nan: skip passed over.
struct TrainingSums {
  step::RunningSums epoch;
  step::RunningSums interval;
  int64_t nan_skipped = 0;

  void add(const step::MicroBatchSums& sums);
  // A new epoch, after its sums were collected.
  void start_epoch();
  // Takes out `samples` counted by steps found non-finite after the fact.
  void skip(int64_t steps, int64_t samples);
  // Under ddp the ranks' sums are summed into the checkpoint (a collective).
  void save(checkpoint::TrainingState& state, parallel::Strategy& strategy) const;
  void restore(const checkpoint::TrainingState& state, parallel::Strategy& strategy);
};

// What the evaluations found and decided: the best score (best.ckpt), the stop
// rules, the best weights (train.early_stopping.restore_best), the last
// result, the target reached and why training ended early.
struct EvaluationRecord {
  std::optional<double> best_score;  // accuracy, or -loss for regression
  StopRules stop_rules{{}};
  std::vector<torch::Tensor> best_weights;
  double eval_s = 0;         // spent evaluating since the run (this process) started
  int64_t evaluated_at = 0;  // the step of the last evaluation (0: none); its result is last_test
  step::EvalResult last_test;
  std::optional<TargetReached> target;
  std::string ended_early;  // an evaluation ended training: why

  // Whether `test` beats the best score so far, which it then becomes.
  bool improves_best(const step::EvalResult& test, bool classification);
  void save(checkpoint::TrainingState& state) const;
  // `model` checks the stored best weights' names and shapes.
  void restore(const checkpoint::TrainingState& state, torch::nn::Module& model, const std::string& checkpoint_name);
};

}  // namespace gputrain::train::detail
