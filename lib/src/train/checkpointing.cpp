#include "checkpointing.h"

#include <spdlog/spdlog.h>

namespace gputrain::train::detail {

Checkpointer::Checkpointer(const config::CheckpointConfig& cadence, bool checkpoint_on_stop, const FitOptions& options,
                           parallel::Strategy& strategy, std::optional<checkpoint::Position> resumed_from,
                           std::string resumed_path)
    : token_(options.stop),
      strategy_(strategy),
      enabled_(!options.checkpoint_dir.empty()),
      every_(cadence.every),
      every_steps_(cadence.every_steps),
      checkpoint_on_stop_(checkpoint_on_stop),
      last_good_(std::move(resumed_path)) {
  if (enabled_ && strategy.is_primary()) {
    store_.emplace(options.checkpoint_dir, cadence.keep, resumed_from, options.write_hooks);
  }
}

parallel::StepFlags Checkpointer::requests() {
  parallel::StepFlags local;
  if (token_ == nullptr) return local;
  local.stop = token_->stop_requested();
  local.checkpoint = token_->take_checkpoint_request();
  local.preempt = token_->preemption_requested();
  return local;
}

Checkpointer::Due Checkpointer::due_after_step(int64_t step, const parallel::StepFlags& agreed) const {
  Due due;
  due.preempt = agreed.preempt;
  due.stop = agreed.stop || agreed.preempt;
  due.checkpoint = agreed.checkpoint || agreed.preempt || (due.stop && checkpoint_on_stop_);
  if (due.preempt) {
    spdlog::info("preemption notice: step {} is done; checkpointing on every rank, then stopping", step);
  } else if (due.stop) {
    spdlog::info("stop requested: step {} is done", step);
  }
  due.checkpoint = enabled_ && (due.checkpoint || (every_steps_ > 0 && step % every_steps_ == 0));
  return due;
}

bool Checkpointer::stop_requested() { return strategy_.any_rank(token_ != nullptr && token_->stop_requested()); }

void Checkpointer::write(const checkpoint::TrainingState& state, const torch::nn::Module& model,
                         const torch::optim::Optimizer& optimizer, bool regular, bool best) {
  if (!store_) return;
  const std::string bytes = checkpoint::encode(state, model, optimizer);
  const auto& at = state.position;
  if (regular) {
    last_good_ = store_->save(at, bytes).string();
    spdlog::info("checkpoint {} ({} epochs and {} micro-batches done, step {})", last_good_, at.epoch, at.batch,
                 at.step);
  }
  if (best) {
    const auto path = store_->save_best(bytes);
    spdlog::info("best test score so far ({:.6g}): {}", state.best_score.value_or(0.0), path.string());
  }
}

}  // namespace gputrain::train::detail
