#pragma once
// The run's scalars as TensorBoard event files in the run directory, so
// `tensorboard --logdir runs` shows every run. Every log interval writes
// train_step/*; every epoch train/*, test/* and, on CUDA, gpu/*. The x axis is
// the optimizer step (the epoch for unlabeled data, which takes no steps).
#include <filesystem>

#include "gputrain/report/event_file.h"
#include "gputrain/report/run_info.h"
#include "gputrain/train/observer.h"

namespace gputrain::report {

class TensorBoardWriter : public train::TrainObserver {
 public:
  // `run` says which scalars mean something: losses for labeled data, the
  // loss scale under fp16. The scalars are the fields metrics.jsonl's records
  // declare one for (lib/src/report/metrics_record.h).
  TensorBoardWriter(const std::filesystem::path& run_dir, const RunInfo& run);
  void on_step(const train::StepMetrics& m) override;
  void on_epoch(const train::EpochMetrics& m) override;
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  EventFile file_;
  bool labeled_;
  bool fp16_;
};

}  // namespace gputrain::report
