#pragma once
// A TrainObserver that records what the trainer reports.
#include <vector>

#include "gputrain/train/observer.h"

namespace gputrain::train {

struct Recorder : TrainObserver {
  std::vector<StepMetrics> steps;
  std::vector<EpochMetrics> epochs;
  int64_t progress_calls = 0;
  void on_progress(const Progress&) override { ++progress_calls; }
  void on_step(const StepMetrics& m) override { steps.push_back(m); }
  void on_epoch(const EpochMetrics& m) override { epochs.push_back(m); }
};

}  // namespace gputrain::train
