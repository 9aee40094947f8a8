#pragma once
// The trainer's state, shared by trainer.cpp (building, resuming,
// checkpoint snapshots) and loop.cpp (epochs and steps).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpointing.h"
#include "gputrain/train/builder.h"
#include "gputrain/train/lookahead.h"
#include "gputrain/train/profile.h"
#include "gputrain/train/rank_timing.h"
#include "gputrain/train/trainer.h"
#include "gputrain/train/weight_average.h"
#include "run_state.h"

namespace gputrain::train {

using Clock = std::chrono::steady_clock;

struct Trainer::State {
  plan::LoopPlan loop;
  config::FrozenBatchnorm freeze_batchnorm{};  // model.freeze_batchnorm: how frozen batchnorm layers run
  int64_t loader_workers = 0;                  // data.num_workers, for the message when the host runs out
  plan::EvaluationPlan evaluation;
  RunParts run;
  detail::RunPosition position;
  detail::TrainingSums sums;
  detail::EvaluationRecord evals;
  std::unique_ptr<detail::Checkpointer> checkpointer;  // while fit() runs
  std::unique_ptr<RankTimer> rank_timer;               // while fit() runs
  parallel::StepFlags agreed;                          // the last optimizer step's, agreed by every rank
  bool stopping = false;                               // a stop request (a signal): the run is interrupted
  bool preempted = false;                              // ... by a preemption notice (SIGUSR1)
  std::optional<WeightAverage> ema;                    // train.ema
  std::optional<Lookahead> lookahead;                  // optim.lookahead
  std::unique_ptr<ProfileWindow> profile;              // train.profile, while fit() runs
  Clock::time_point run_start;

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
  int64_t skipped_steps() const { return run.scaler->skipped_steps() + sums.nan_skipped; }
  void save_checkpoint(bool regular, bool best);
};

}  // namespace gputrain::train
