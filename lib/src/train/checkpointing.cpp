#include "checkpointing.h"

#include <spdlog/spdlog.h>

namespace gputrain::train::detail {

Checkpointer::Checkpointer(const config::ExperimentConfig& config, const FitOptions& options,
                           parallel::Strategy& strategy, std::optional<checkpoint::Position> resumed_from,
                           std::string resumed_path)
    : token_(options.stop),
      strategy_(strategy),
      enabled_(!options.checkpoint_dir.empty()),
      every_(config.checkpoint.every),
      every_steps_(config.checkpoint.every_steps),
      checkpoint_on_stop_(config.train.on_sigint == "checkpoint"),
      last_good_(std::move(resumed_path)) {
  if (enabled_ && strategy.is_primary()) {
    store_.emplace(options.checkpoint_dir, config.checkpoint.keep, resumed_from, options.write_hooks);
  }
}

Checkpointer::Due Checkpointer::after_step(int64_t step) {
  Due due;
  const bool stop = token_ != nullptr && token_->stop_requested();
  const bool checkpoint = token_ != nullptr && token_->take_checkpoint_request();
  // One collective per step; the rarer questions only once some rank has a request.
  if (strategy_.any_rank(stop || checkpoint)) {
    due.stop = strategy_.any_rank(stop);
    due.checkpoint = strategy_.any_rank(checkpoint) || (due.stop && checkpoint_on_stop_);
    if (due.stop) spdlog::info("stop requested: step {} is done", step);
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
