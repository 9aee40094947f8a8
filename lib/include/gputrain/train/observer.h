#pragma once
// What the trainer reports while it runs. Writers of logs, metrics files and
// progress bars implement TrainObserver; the trainer knows none of them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/step/running_sums.h"

namespace gputrain::train {

// The lowest, mean and highest of one figure over the ranks.
struct Spread {
  double min = 0;
  double mean = 0;
  double max = 0;
};

// ddp, each log interval: every rank's seconds per optimizer step.
struct RankTiming {
  int64_t ranks = 0;
  Spread step_s;             // wall time per step
  Spread data_wait_s;        // blocked waiting for the loader
  Spread collective_wait_s;  // blocked in collectives (the all-reduce backward did not hide, the step's flags)
  int64_t slowest = 0;       // the rank with the most work of its own (step less collective wait)
};

// Every train.log_every optimizer steps.
struct StepMetrics {
  int64_t epoch = 0;               // 1-based
  int64_t step = 0;                // optimizer steps since the run began
  double loss = 0;                 // mean per-sample loss over the interval
  std::optional<double> accuracy;  // classification only
  double samples_per_s = 0;
  double lr = 0;
  double elapsed_s = 0;             // since the run began
  double loss_scale = 1;            // fp16's gradient scale; 1 otherwise
  int64_t skipped_steps = 0;        // optimizer steps skipped for inf/NaN gradients, so far
  std::optional<RankTiming> ranks;  // ddp only
};

// After every micro-batch, for progress bars: cheap, no device sync.
struct Progress {
  int64_t epoch = 0;
  int64_t epochs = 0;
  int64_t batch = 0;  // 1-based, within the epoch
  int64_t batches = 0;
  int64_t samples = 0;  // seen this epoch
  double epoch_elapsed_s = 0;
  double last_loss = 0;  // at the last log interval
};

// One GPU's activity over an epoch (its training and its test pass), as NVML
// reported it: filled by report::GpuMonitorObserver, never by the trainer.
struct GpuActivity {
  int64_t index = 0;     // logical CUDA index
  int64_t samples = 0;   // NVML readings behind these figures
  double util_mean = 0;  // percent of the time a kernel ran
  double util_max = 0;
  int64_t memory_used_max = 0;         // bytes, every process on the device
  std::optional<double> power_mean_w;  // unset where the board does not report it
  std::optional<double> temperature_max_c;
};

struct EpochMetrics {
  int64_t epoch = 0;
  int64_t step = 0;
  step::EvalResult train;
  step::EvalResult test;
  bool has_test = false;
  double samples_per_s = 0;  // training samples / epoch training time
  double epoch_s = 0;        // training time of the epoch
  double elapsed_s = 0;
  double lr = 0;
  double loss_scale = 1;
  int64_t skipped_steps = 0;
  bool cuda = false;  // the memory figures below are meaningful
  int64_t memory_allocated = 0;
  int64_t memory_reserved = 0;
  int64_t memory_peak = 0;
  double loader_wait_s = 0;  // training thread blocked waiting for batches
  // The share of epoch_s in which the GPU ran the steps, timed with CUDA
  // events around each step (device::StepBusyTimer); unset off CUDA.
  std::optional<double> gpu_busy;
  // Achieved arithmetic (train::Efficiency): TFLOP/s from samples_per_s, and
  // its share of the training devices' peak; unset where not known.
  std::optional<double> tflops;
  std::optional<double> peak_share;
  std::vector<GpuActivity> gpus;  // empty: not monitored
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_progress(const Progress&) {}
  virtual void on_step(const StepMetrics&) {}
  virtual void on_epoch(const EpochMetrics&) {}
};

// Forwards every event to each observer in turn.
class ObserverList : public TrainObserver {
 public:
  void add(TrainObserver* observer) { observers_.push_back(observer); }
  void on_progress(const Progress& p) override {
    for (auto* o : observers_) o->on_progress(p);
  }
  void on_step(const StepMetrics& s) override {
    for (auto* o : observers_) o->on_step(s);
  }
  void on_epoch(const EpochMetrics& e) override {
    for (auto* o : observers_) o->on_epoch(e);
  }

 private:
  std::vector<TrainObserver*> observers_;
};

}  // namespace gputrain::train
