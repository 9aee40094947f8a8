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
#include "gputrain/train/trainer.h"
#include "running_sums.h"

namespace gputrain::train {

using Clock = std::chrono::steady_clock;

struct Trainer::State {
  config::ExperimentConfig config;
  RunParts run;
  int64_t step = 0;  // optimizer steps since the run began
  // Where the run stands besides `step`: what a checkpoint records.
  int64_t epochs_done = 0;
  int64_t batch = 0;  // micro-batches of the current epoch consumed
  detail::RunningSums epoch_sums;
  detail::RunningSums interval;
  int64_t nan_skipped = 0;  // train.on_nan: skip
  std::optional<double> best_score;
  std::optional<checkpoint::Position> resumed_from;
  std::string resumed_path;
  std::unique_ptr<detail::Checkpointer> checkpointer;  // while fit() runs
  parallel::StepFlags agreed;                          // the last optimizer step's, agreed by every rank
  bool stopping = false;

  // loop.cpp
  void optimizer_step(const std::vector<data::Batch>& group);
  EvalResult train_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start, double& epoch_s);
  void forward_only_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start);
  void after_step();
  void end_epoch(int64_t epoch, const EvalResult& test);
  // trainer.cpp
  EvalResult evaluate();
  int64_t skipped_steps() const { return run.scaler->skipped_steps() + nan_skipped; }
  void save_checkpoint(bool regular, bool best);
};

}  // namespace gputrain::train
