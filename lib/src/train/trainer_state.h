#pragma once
// The trainer's state, shared by trainer.cpp (building, resuming,
// checkpoint snapshots) and loop.cpp (epochs and steps).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpointing.h"
#include "gputrain/step/running_sums.h"
#include "gputrain/train/builder.h"
#include "gputrain/train/rank_timing.h"
#include "gputrain/train/stop_rules.h"
#include "gputrain/train/trainer.h"
#include "gputrain/train/weight_average.h"

namespace gputrain::train {

using Clock = std::chrono::steady_clock;

struct Trainer::State {
  config::ExperimentConfig config;
  RunParts run;
  int64_t step = 0;  // optimizer steps since the run began
  // Where the run stands besides `step`: what a checkpoint records.
  int64_t epochs_done = 0;
  int64_t batch = 0;  // micro-batches of the current epoch consumed
  step::RunningSums epoch_sums;
  step::RunningSums interval;
  int64_t nan_skipped = 0;  // train.on_nan: skip
  std::optional<double> best_score;
  std::optional<checkpoint::Position> resumed_from;
  std::string resumed_path;
  std::unique_ptr<detail::Checkpointer> checkpointer;  // while fit() runs
  std::unique_ptr<RankTimer> rank_timer;               // while fit() runs
  parallel::StepFlags agreed;                          // the last optimizer step's, agreed by every rank
  bool stopping = false;                               // a stop request (a signal): the run is interrupted
  bool preempted = false;                              // ... by a preemption notice (SIGUSR1)
  std::optional<WeightAverage> ema;                    // train.ema
  StopRules stop_rules{{}};
  std::vector<torch::Tensor> best_weights;  // train.early_stopping.restore_best: the weights that scored best
  Clock::time_point run_start;
  double eval_s = 0;         // spent evaluating since run_start
  int64_t evaluated_at = 0;  // the step of the last evaluation (0: none); this process's result is last_test
  step::EvalResult last_test;
  std::optional<TargetReached> target;
  std::string ended_early;  // an evaluation ended training: why

  // loop.cpp
  void optimizer_step(const std::vector<data::Batch>& group);
  // Fills m.train, m.epoch_s and, on CUDA, m.gpu_busy.
  void train_epoch(int64_t epoch, TrainObserver& observer, EpochMetrics& m);
  void forward_only_epoch(int64_t epoch, TrainObserver& observer);
  void after_step(int64_t epoch);
  // train.on_nan for the steps run.non_finite counted since its last read
  // (one sync; nothing when the check runs on the host): stop throws, naming
  // them; skip counts them and takes their samples out of the running sums.
  void apply_on_nan();
  // Evaluates (the weight average when there is one) and judges the result by
  // train.target_accuracy and train.early_stopping.
  const step::EvalResult& evaluate_and_judge(int64_t epoch);
  void end_epoch(int64_t epoch, const step::EvalResult* test);
  // The weights training ends with: the best (restore_best), or the average.
  void final_weights();
  // trainer.cpp
  step::EvalResult evaluate();
  int64_t skipped_steps() const { return run.scaler->skipped_steps() + nan_skipped; }
  void save_checkpoint(bool regular, bool best);
};

}  // namespace gputrain::train
