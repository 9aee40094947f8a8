#pragma once
// Makes a run's parts from its config: the strategy, the data sets and their
// batch sources, the model, the loss, the optimizer and its step. train, test
// and bench build through these, so each part is made one way.
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>

#include <memory>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"
#include "gputrain/device/resolve.h"
#include "gputrain/optim/loss.h"
#include "gputrain/optim/schedule.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/plan/fast_paths.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/step/amp.h"
#include "gputrain/step/optimizer_step.h"
#include "gputrain/train/efficiency.h"
#include "gputrain/train/evaluate.h"

namespace gputrain::train {

// Logs each fast path the plan decided and sets the process-wide backends
// (the model's channels-last format is plan::assemble_trainable's).
void apply_fast_paths(const plan::FastPaths& fast);

// Everything a training run is made of, before any step has run.
struct RunParts {
  parallel::StrategyPlan strategy_plan;
  int64_t world_size = 1;
  std::unique_ptr<parallel::Strategy> strategy;
  torch::Device device{torch::kCPU};
  std::shared_ptr<const data::Dataset> train_set;
  std::shared_ptr<const data::Dataset> test_set;  // null for unlabeled data
  std::unique_ptr<data::BatchLoader> train_batches;
  std::unique_ptr<data::BatchLoader> test_batches;  // null for unlabeled data
  plan::BatchPlan batch;
  torch::nn::Sequential model{nullptr};
  optim::LossSpec loss;  // loss.classes > 0: classification
  plan::StepPlan step;   // how each step runs, as the plan decided
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::unique_ptr<step::GradScaler> scaler;
  // train.on_nan's check on the device (null: the step's agreement reads the
  // loss on the host, as under ddp or fp16's scaler). Before `stepper`, which uses it.
  std::unique_ptr<step::NonFiniteSteps> non_finite;
  std::unique_ptr<step::OptimizerStep> stepper;  // eager, or a CUDA graph where train.cuda_graph can apply
  Efficiency efficiency;                         // what each epoch's TFLOP/s is a share of
  TestTimeAugmentation tta;

  bool labeled() const { return test_batches != nullptr; }
  bool classification() const { return loss.classes > 0; }
};

// Builds the run `plan` resolved and logs what it made. Throws DataError /
// ConfigError for input the run cannot use.
RunParts build_run(const plan::RunPlan& plan);

// The parts of `run`'s step (run.stepper's): bench makes an eager step of
// them with its phase hook, to time the step the run trains with.
step::StepParts step_parts(const RunParts& run);

}  // namespace gputrain::train
