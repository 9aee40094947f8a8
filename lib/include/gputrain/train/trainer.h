#pragma once
// A training run: its parts built from the config (builder.h), then epochs of
// train + test (loop.cpp), each optimizer step one step::OptimizerStep, checkpoints
// on the checkpoint.* cadence, and every figure reported to a TrainObserver.
#include <torch/nn/modules/container/sequential.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/train/observer.h"
#include "gputrain/train/stop_token.h"

namespace gputrain::train {

// train.target_accuracy reached: when, and how long it took.
struct TargetReached {
  double target = 0;
  double accuracy = 0;  // of the evaluation that reached it
  int64_t epoch = 0;    // 1-based; the epoch it was reached in
  int64_t step = 0;
  double train_s = 0;  // since training began, evaluations left out
  double wall_s = 0;   // since training began
};

struct TrainSummary {
  int64_t epochs = 0;
  int64_t steps = 0;
  step::EvalResult last_train;
  step::EvalResult last_test;
  bool has_test = false;
  double elapsed_s = 0;
  bool stopped = false;                 // on a StopToken request, before train.epochs
  bool preempted = false;               // the request was a preemption notice (a checkpoint was due)
  std::string checkpoint;               // the newest checkpoint written or resumed from; "" when none
  std::optional<TargetReached> target;  // train.target_accuracy, when reached
  std::string ended_early;              // why an evaluation ended training before train.epochs; "" when none
};

struct FitOptions {
  // Where checkpoints go (<run dir>/<checkpoint.dir>); empty: none are written.
  std::filesystem::path checkpoint_dir;
  // Polled at every optimizer-step boundary; null: nothing stops the run early.
  StopToken* stop = nullptr;
  WriteHooks write_hooks;
  // Where train.profile's trace and summary go (the run directory); empty: no profile (ranks other than 0).
  std::filesystem::path profile_dir;
};

class Trainer {
 public:
  // Builds the run `plan` resolved (model, loaders, optimizer, step) and logs
  // the model summary. Throws DataError / ConfigError for input the run cannot use.
  explicit Trainer(const plan::RunPlan& plan);
  ~Trainer();

  // Continues from `checkpoint` rather than from the seed's initial state:
  // weights, optimizer, loss scaler, position, partial sums and generators.
  // The config must be the checkpoint's (see checkpoint::resolve_resume), and
  // its position one the plan can continue (plan::check_resumable).
  void resume(const checkpoint::Checkpoint& checkpoint);

  // Trains to train.epochs, or until `options.stop` asks; writes checkpoints
  // to options.checkpoint_dir per checkpoint.*. A non-finite loss with
  // train.on_nan: stop, and running out of GPU memory, throw Error (exit 1).
  TrainSummary fit(TrainObserver& observer, const FitOptions& options = {});
  // One pass over the test split in eval mode under no-grad.
  step::EvalResult evaluate();

  torch::nn::Sequential model() const;
  plan::TrainLayout layout() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::train
