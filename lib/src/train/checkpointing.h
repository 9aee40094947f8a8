#pragma once
// When the trainer checkpoints and stops: checkpoint.every epochs,
// checkpoint.every_steps steps, best.ckpt on a better test score, and the
// StopToken's requests (signals), agreed by every rank. Only the primary rank
// writes.
#include <optional>
#include <string>

#include "gputrain/checkpoint/store.h"
#include "gputrain/config/config.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/train/trainer.h"

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace gputrain::train::detail {

class Checkpointer {
 public:
  // `cadence`: the checkpoint section; `checkpoint_on_stop`: a stop request
  // writes a checkpoint first (train.on_sigint: checkpoint).
  // `resumed_from` / `resumed_path`: the checkpoint the run continues, if any.
  Checkpointer(const config::CheckpointConfig& cadence, bool checkpoint_on_stop, const FitOptions& options,
               parallel::Strategy& strategy, std::optional<checkpoint::Position> resumed_from,
               std::string resumed_path);

  struct Due {
    bool checkpoint = false;
    bool stop = false;
    bool preempt = false;  // the stop answers a preemption notice
  };
  // This process's stop and checkpoint requests (a checkpoint request is
  // taken), for Strategy::agree once per optimizer step.
  parallel::StepFlags requests();
  // After every optimizer step, from the flags every rank agreed on.
  Due due_after_step(int64_t step, const parallel::StepFlags& agreed) const;
  // A stop request, agreed by every rank.
  bool stop_requested();

  bool due_at_epoch_end(int64_t epoch) const { return enabled_ && every_ > 0 && epoch % every_ == 0; }
  bool keeps_best() const { return enabled_ && every_ > 0; }

  // The primary rank writes a regular checkpoint and/or best.ckpt; the others return.
  void write(const checkpoint::TrainingState& state, const torch::nn::Module& model,
             const torch::optim::Optimizer& optimizer, bool regular, bool best);

  // The newest checkpoint written or resumed from; "" when none.
  const std::string& last_good() const { return last_good_; }

 private:
  StopToken* token_;
  parallel::Strategy& strategy_;
  bool enabled_;
  int64_t every_;
  int64_t every_steps_;
  bool checkpoint_on_stop_;
  std::optional<checkpoint::CheckpointStore> store_;
  std::string last_good_;
};

}  // namespace gputrain::train::detail
