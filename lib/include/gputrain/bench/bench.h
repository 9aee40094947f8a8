#pragma once
// `gputrain bench`: where the time of a train step goes, like `caffe time`,
// which runs the real net. The run's own parts as train builds them
// (train::build_run) and its own step (step::OptimizerStep: clipping, the
// loss scaler and the non-finite check included where the run has them), one
// eager step at a time, each phase timed where the step marks its end (with a
// device sync there on CUDA), and beside it the compute bound: the run's step
// (its CUDA graph where training replays one) on one step's batches already
// on the device, with no sync between steps.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/plan/run_plan.h"
#include "gputrain/train/profile.h"

namespace gputrain::bench {

struct BenchOptions {
  int64_t steps = 100;  // timed steps
  int64_t warmup = 10;  // untimed steps before them
};

// --profile N: N more steps after the timed ones, recorded by LibTorch's
// profiler (untimed, so the profiler's cost is not in the figures) into `trace`.
struct BenchProfile {
  int64_t steps = 0;
  std::filesystem::path trace = "profile_trace.json";
};

struct PhaseTime {
  std::string name;  // data, forward, backward, optimizer, step
  double mean_ms = 0;
  double min_ms = 0;
};

struct BenchReport {
  std::string model;
  std::string dataset;
  std::string device;
  int64_t threads = 0;       // intra-op threads (CPU)
  int64_t batch = 0;         // rows of a forward pass (the micro-batch)
  int64_t accumulation = 1;  // micro-batches a step, as the run takes them
  std::string step;          // what the step does beyond forward, backward and the update
  int64_t steps = 0;
  int64_t warmup = 0;
  std::vector<PhaseTime> phases;  // data (a step's micro-batches from the loader), forward (with the loss),
                                  // backward (each summed over the step's micro-batches), optimizer (the
                                  // ranks' agreement, unscale, clip, update); then step, their sum
  double samples_per_s = 0;       // samples of the timed steps / their time
  double bound_step_ms = 0;       // compute bound: one step on a batch already on the device
  double bound_samples_per_s = 0;
  bool bound_graphed = false;  // the bound's step replayed as a CUDA graph (train.cuda_graph), as training runs it
  std::optional<train::ProfileSummary> profile;  // --profile
};

// The training split's loader alone, as the run plans it (data set, workers,
// augmentation, device cache): batches taken as fast as it makes them and
// moved to the device, nothing else. Tells whether the loader can keep a step fed.
struct LoaderBenchReport {
  std::string dataset;
  std::string device;
  int64_t threads = 0;        // intra-op threads (CPU): they assemble a resident split's batches
  int64_t workers = 0;        // data.num_workers as planned (0: the calling thread)
  bool device_cache = false;  // batches assembled on the device from a resident copy
  int64_t batch = 0;
  int64_t batches = 0;  // timed
  int64_t warmup = 0;
  double samples_per_s = 0;
  double wait_ms = 0;  // mean time a batch took to arrive (next() and the copy)
};
LoaderBenchReport run_loader_bench(const plan::RunPlan& plan, const BenchOptions& options);
std::string format_loader_bench(const LoaderBenchReport& report);

// Throws what Trainer's constructor throws for a config it cannot run, and a
// UserError for data without labels (nothing to train against).
BenchReport run_bench(const plan::RunPlan& plan, const BenchOptions& options, const BenchProfile& profile = {});

// The report as a table, one phase per line.
std::string format_bench(const BenchReport& report);

}  // namespace gputrain::bench
